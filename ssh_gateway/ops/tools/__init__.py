"""The operator's tools of one module each: the function each `ssh-gateway` command (ssh_gateway/ops/commands/)
calls, with what it needs. A tool of several modules has a package of its own beside this one (doctor/, preview/,
reconcile/, recovery/); what tools share is in shared/.

- main_job: the demo, the main job on this machine (`demo`);
- drift: has anyone changed Pangolin, Kubernetes or the NSG by hand (`drift-check`);
- gateway_files: the gateway host's Traefik entry points and Gerbil ports (`gateway-config`);
- host_identity_files: an instance's host key and certificate, derived from the stack (`host-identity`);
- instance_edits: a stack file's instances added, removed, listed (`instances`; a platform's Python seam too);
- ssh_files: the stacks' Host blocks and known_hosts lines in ~/.ssh (`ssh-config`);
- pulumi_up: `pulumi up`, a first one writing its checkpoint once (`up`).
"""
