"""`python -m kernelcraft.cli`: the command line, as the `kernelcraft` script runs it."""

import sys

from kernelcraft.cli.app import main

sys.exit(main())
