"""ssh-gateway beside its Pulumi program (`__main__.py`, `components/`, `providers/` at the repo root).

- `ssh_gateway.core`: the domain vocabulary, Pulumi-free: port ranges and the allocator, names and type
  tokens, the firewall's rules, addresses, the API-key lookup, and the stack settings model. The program,
  the providers, the tools and the tests all import it.
- `ssh_gateway.ops`: the operator's tools: the offline toolchain environment, Automation API helpers, the
  doctor, the drift check and the preview summary.
- `ssh_gateway.local`: the local rig: the demo (the main job on one machine), a loopback sshd and the tests'
  control plane (kube-apiserver + etcd). The Pangolin emulator has one launcher, `pangolin_emulator.harness`.
"""
