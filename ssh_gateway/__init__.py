"""ssh-gateway beside its Pulumi program (`__main__.py`, `components/`, `providers/` at the repo root).

- `ssh_gateway.ops`: the operator's tools: the `ssh-gateway` CLI, the doctor, the drift check, the preview
  summary, `ssh-config`, `instances`, `recover`, the demo (the main job on one machine) and the Automation API
  helpers. Their one way into Pangolin is `ssh_gateway.ops.shared.pangolin_api`.
- `ssh_gateway.local`: the local rig: a loopback sshd, Envoy, the tests' control plane (kube-apiserver + etcd)
  and the `local-cluster` command. The Pangolin emulator has one launcher, `pangolin_emulator.harness`.
- `ssh_gateway.core`: the domain vocabulary, Pulumi-free: port ranges and the allocator, names and type
  tokens, the firewall's rules, addresses, targets, host identity and trust, CONNECT routing, the Pangolin org,
  the API-key lookup, the shared value types (`fields`), the stack settings model (`settings/`) and the stack
  outputs' contract (`outputs`). The program, the providers, the tools, the policy pack and
  the tests all import it.
- `ssh_gateway.plumbing`: the ground floor: the offline toolchain environment and pid files.

Each imports only the ones below it in this list (the contracts in pyproject.toml).
"""
