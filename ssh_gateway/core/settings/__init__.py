"""Stack settings: every `ssh-gateway:*` config key as one pydantic model, validated before any resource exists.

Values are parsed once (a port range into a `PortRange`, sources into `Cidrs | ServiceTag`, an instance into the
shape its `routing` and `target` call for, the CONNECT entry and its gateway into the shapes their `via` and
`kind` call for) and passed on typed. `parse_settings` reports every problem at once, each naming the config
key, the value and what is allowed, with a "did you mean" for a misspelt key.

One job a module: the shared value types are `ssh_gateway.core.fields`; here `sections` has one model per key,
`schema` the `Settings` with the rules that span sections, `translate` the domain objects they become,
`errors` the edge (decoding Pulumi's config, rendering pydantic's errors), `derived_names` the names an instance
gives other systems, and `reader` the one way in: a stack's config or its stack file to `Settings`.
"""

from ssh_gateway.core.instance_keys import INSTANCE_KEYS, ROUTINGS, TARGETS
from ssh_gateway.core.outputs import Routing

from .errors import SettingsError, decode_config, parse_settings
from .reader import read_config, read_stack_file, stack_file_config
from .schema import Settings
from .sections import (
    KINDS,
    NAMESPACE,
    ClusterIpInstance,
    Connect,
    ConnectModeInstance,
    ConnectServiceInstance,
    ConnectStaticInstance,
    DirectPublic,
    Discovery,
    EnvoyGatewaySettings,
    FirewallOff,
    FirewallOn,
    HostCa,
    HostIdentityOff,
    HostIdentityOn,
    Instance,
    IstioGatewaySettings,
    NodePortInstance,
    PangolinPublic,
    PortModeInstance,
    StaticInstance,
)

__all__ = [
    "INSTANCE_KEYS",
    "KINDS",
    "NAMESPACE",
    "ROUTINGS",
    "TARGETS",
    "ClusterIpInstance",
    "Connect",
    "ConnectModeInstance",
    "ConnectServiceInstance",
    "ConnectStaticInstance",
    "DirectPublic",
    "Discovery",
    "EnvoyGatewaySettings",
    "FirewallOff",
    "FirewallOn",
    "HostCa",
    "HostIdentityOff",
    "HostIdentityOn",
    "Instance",
    "IstioGatewaySettings",
    "NodePortInstance",
    "PangolinPublic",
    "PortModeInstance",
    "Routing",
    "Settings",
    "SettingsError",
    "StaticInstance",
    "decode_config",
    "parse_settings",
    "read_config",
    "read_stack_file",
    "stack_file_config",
]
