"""`python -m ssh_gateway.ops.reconcile`."""

import sys

from .command import main

sys.exit(main())
