"""`python -m kernelcraft.mcp`: the MCP server, as `kernelcraft mcp` runs it."""

import sys

from kernelcraft.mcp import main

sys.exit(main())
