"""`python -m pangolin_emulator`: see `--help`."""

import sys

from pangolin_emulator.cli import main

sys.exit(main())
