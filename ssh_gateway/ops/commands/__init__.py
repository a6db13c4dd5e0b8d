"""The `ssh-gateway` commands whose tool loads the Pulumi SDK, lives outside ops/, or is a library of its own:
each module holds one `COMMAND` (ssh_gateway/ops/command.py) that imports its tool when it runs, so that
`ssh-gateway --help` answers without the SDK. A command whose tool module is light keeps its `COMMAND` there
(up, shards, recover, gateway-config, host-identity); ssh_gateway/ops/cli.py lists them all."""
