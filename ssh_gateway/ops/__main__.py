"""`python -m ssh_gateway.ops`: the `ssh-gateway` command, where its console script is not installed."""

import sys

from .cli import main

sys.exit(main())
