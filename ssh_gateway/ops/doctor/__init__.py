"""The doctor: reads a stack's outputs and names, per instance, the first broken layer of the ssh path.

    python -m ssh_gateway.ops.doctor --stack local [--json] [--timeout 3] [--instance NAME ...]

Layers, in order: the public name resolves (dns); the gateway port accepts TCP (tcp); an SSH banner comes
back (banner); the host certificate served is the stack CA's, for the name dialled, and valid (hostidentity,
"host identity"); or, for an instance with a pinned hostKey, the key is the pinned one (hostkey); and
Pangolin's resource and target exist, are enabled and match the stack (pangolin).
"""

from .diagnose import diagnose
from .model import LAYERS, Check, Endpoint, InstanceReport, endpoints_from_outputs
from .report import as_json, render

__all__ = ["LAYERS", "Check", "Endpoint", "InstanceReport", "as_json", "diagnose", "endpoints_from_outputs", "render"]
