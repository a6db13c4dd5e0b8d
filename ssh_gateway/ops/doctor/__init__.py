"""The doctor: reads a stack's outputs and names, per instance, the first broken layer of the ssh path.

    ssh-gateway doctor --stack local [--json] [--timeout 3] [--instance NAME ...] [--outputs FILE]

Layers, in order: the public name resolves (dns); the gateway port accepts TCP (tcp); for a connect-mode
instance, the gateway answers its `CONNECT <authority>:22` with 200 (connect: 404 no route, 503 no Service or
endpoints, 426 HTTP/1.0 refused); an SSH banner comes back (banner); the host certificate served is the stack
CA's, for the name dialled, and valid (hostidentity, "host identity"); or, for an instance with a pinned
hostKey, the key is the pinned one (hostkey); and Pangolin's resource and target exist, are enabled and match
the stack (pangolin; a connect-mode instance's is the CONNECT entry's).
"""

from .diagnose import diagnose
from .model import LAYERS, Check, Endpoint, InstanceReport, endpoints_from_outputs
from .report import as_json, render

__all__ = ["LAYERS", "Check", "Endpoint", "InstanceReport", "as_json", "diagnose", "endpoints_from_outputs", "render"]
