"""Recovery after a killed run: `ssh-gateway recover` (repair.py) and what it stands on.

- repair.py: the recovery, in steps: a stale lock, a broken checkpoint, the pending operations, the objects
  that exist but that no state holds;
- adopt.py: the objects the program would create that exist already, by their deterministic ids and this stack's
  mark, imported with `pulumi import`; also whether a first `up` may skip its checkpoints
  (ssh_gateway/ops/tools/pulumi_up.py);
- provider_probe.py: asks the stack's own providers (their gRPC `Read`) whether those objects exist;
- state_backend.py: a stack's lock and checkpoint on its backend, as one `StackState`: file_backend.py (the local
  file backend, which also repairs what a kill can break there) or azblob_backend.py (Azure Blob);
- stack_lock.py: a pulumi lock file, and whether its process still runs.

This package imports nothing at import time; `ssh-gateway recover` (ssh_gateway/ops/commands/recover.py) imports
repair.py when it runs.
"""
