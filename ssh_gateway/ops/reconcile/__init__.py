"""`ssh-gateway reconcile --stack S [--stack S2 ...] [--once] [--ambient] [--skip-preview]`: keeps each stack in
step with the cluster (docs/reconciler.md).

It watches each stack's selected pods or Services (its `ssh-gateway:discovery` section) and runs the stack's
`ssh-gateway up` when something that matters changes: the project's own path, with its recovery rules. It is only
a trigger: the program lists the cluster itself at every run, completely, and fails before registering anything
when it cannot, so a reconciler that misses an event, or runs while the API server is gone, deletes nothing.

- `watch`: a stack's watches (list, watch from the resourceVersion, relist on 410, backoff when the server is gone);
- `worker`: one per stack, one `up` at a time, changes batched into the next, debounce, resync, grace wake-up;
- `lease`: the Kubernetes Lease per stack that two replicas take turns with;
- `after_pass`: the status ConfigMap read after each pass: the gauges, the `events` (Kubernetes Events on the
  objects), the next grace expiry;
- `metrics`, `health`, `signals`, `endpoint`: the Prometheus series, the health rule, what the watch and the worker
  report to both, and the HTTP endpoint (`--metrics-address`) that serves them;
- `step_processes`: each `recover` and `up` as the project's own command, a bounded number at once;
- `reconciler`: the stacks' parts put together; `serve`: what `ssh-gateway reconcile` (ops/commands/reconcile.py)
  runs: the targets read, the reconciler run until stopped.

This package imports nothing at import time.
"""
