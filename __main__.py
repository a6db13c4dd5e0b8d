"""ssh-gateway: public ssh endpoints for GPU dev instances through Pangolin. See README.md."""

import pulumi

from components.program import build
from components.settings import load_settings

for key, value in build(load_settings(), project=pulumi.get_project(), stack=pulumi.get_stack()).items():
    pulumi.export(key, value)
