"""The preview summary's room: a stack's `pulumi preview --json`, read and rendered for a reviewer.

- steps.py: the one model of a preview's document (its steps, diagnostics, config), which the drift check and
  recovery's adoption read too;
- context.py: what the rows need around the steps: the port table before and after, who logs in where;
- rows.py: one row per instance the preview touches, and one for the CONNECT entry;
- summary.py: the rows sorted, the warnings, the Markdown (and JSON) a reviewer reads;
- run.py: `pulumi preview --json` run on a stack, and `ssh-gateway preview-summary` (ops/commands/).

This package imports nothing at import time: the drift check and `recover` read steps.py alone.
"""
