"""ssh-gateway: public ssh endpoints for GPU dev instances through Pangolin. See README.md."""

import pulumi

from components.program import build, load_settings, read_pangolin_org

settings = load_settings()
outputs = build(settings, org=read_pangolin_org(settings), project=pulumi.get_project(), stack=pulumi.get_stack())
for key, value in outputs.items():
    pulumi.export(key, value)
