"""ssh-gateway: public ssh endpoints for GPU dev instances through Pangolin. See README.md."""

import pulumi

from components.program import run

run(project=pulumi.get_project(), stack=pulumi.get_stack())
