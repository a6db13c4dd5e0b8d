"""Pulumi dynamic providers of ssh-gateway.

Do not move or rename the provider modules (`providers/*/provider.py`, `providers/pangolin/port_check.py`) or
their provider classes. Every dynamic resource pickles its provider (dill, by reference) into its `__provider`
input, which is its module path and class name, e.g. `providers.pangolin.provider` `PangolinTcpProvider`;
every stack's state keeps that, and the provider process imports it to update or delete the resource. A moved
class leaves each stack with resources that no run can delete. `tests/unit/test_provider_paths.py` pins the
pickles that state holds.
"""
