"""`kernelcraft mcp`: an MCP server (stdio, or streamable HTTP) that gives coding agents kernelcraft's tools:
list_problems, show_problem, evaluate, start_run, run_status, best_kernel, run_report (docs/mcp.md).

A face over kernelcraft.api like the CLI. The MCP SDK is an extra (`pip install 'kernelcraft[mcp]'`): this
module imports without it, and serve() says how to install it when it is missing.
"""

from __future__ import annotations

import sys
from pathlib import Path

INSTALL_HINT = "kernelcraft mcp needs the MCP SDK: pip install 'kernelcraft[mcp]' (or: pip install mcp)"
EXIT_OK, EXIT_USAGE = 0, 2


def sdk_missing() -> bool:
    try:  # the SDK's 2.x API (1.x called its server FastMCP)
        from mcp.server.mcpserver import MCPServer
    except ImportError:
        return True
    return MCPServer is None


def parse_http(text: str) -> tuple[str, int]:
    """HOST:PORT (or :PORT, or PORT) as (host, port); ValueError naming the form otherwise."""
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"--http {text!r}: give HOST:PORT, e.g. 127.0.0.1:8765") from None
    if not 0 < number < 65536:
        raise ValueError(f"--http {text!r}: the port must be 1-65535")
    return (host.strip("[]") or "127.0.0.1"), number


def serve(store: str | Path | None = None, device: str = "auto", http: str | None = None,
          cache_dir: str | Path | None = None) -> int:
    """Serve until the client goes (stdio) or the process is stopped (HTTP). Returns an exit status; a missing
    SDK or a bad --http is one line on stderr and status 2."""
    if sdk_missing():
        print(INSTALL_HINT, file=sys.stderr)
        return EXIT_USAGE
    try:
        address = parse_http(http) if http else None
    except ValueError as exc:
        print(f"kernelcraft mcp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from kernelcraft.mcp.server import build_server
    from kernelcraft.mcp.tools import Defaults

    server, runs = build_server(Defaults(Path(store) if store else None, device, Path(cache_dir) if cache_dir else None))
    try:
        if address:
            server.run("streamable-http", host=address[0], port=address[1])
        else:
            # The SDK points fd 1 at stderr while it serves (the protocol gets a private copy), so nothing
            # kernelcraft, a compiler or a verifier worker writes to stdout can reach the wire.
            server.run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        runs.shutdown()
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """`python -m kernelcraft.mcp [--store PATH] [--device D] [--cache-dir DIR] [--http HOST:PORT]`."""
    import argparse

    parser = argparse.ArgumentParser(prog="kernelcraft mcp", description="Serve kernelcraft's tools over MCP.")
    add_arguments(parser)
    args = parser.parse_args(argv)
    return serve(args.store, args.device, args.http, args.cache_dir)


def add_arguments(parser) -> None:
    """The options of `kernelcraft mcp` (the CLI adds them to its subcommand, `python -m kernelcraft.mcp` here)."""
    parser.add_argument("--store", default=None,
                        help="the run store (default: KERNELCRAFT_HOME, else ~/.kernelcraft/runs.db)")
    parser.add_argument("--device", default="auto", help="the default device of evaluate and start_run: cpu, cuda, "
                                                         "cuda:N or auto (default: a GPU if there is one)")
    parser.add_argument("--cache-dir", default=None, help="builds and baselines (default ~/.cache/kernelcraft)")
    parser.add_argument("--http", default=None, metavar="HOST:PORT",
                        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio")


__all__ = ["INSTALL_HINT", "add_arguments", "main", "serve"]
