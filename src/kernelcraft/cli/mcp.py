"""`kernelcraft mcp`: serve kernelcraft's tools to coding agents over MCP (the server is kernelcraft.mcp; stdio, or
streamable HTTP with --http). Exit status 2 when the MCP SDK is missing (one line: how to install it)."""

from __future__ import annotations

NAME = "mcp"


def add_parser(sub) -> None:
    from kernelcraft.mcp import add_arguments

    add_arguments(sub.add_parser(NAME, help="serve kernelcraft's tools to coding agents (MCP over stdio, or --http)"))


def run(args) -> int:
    from kernelcraft.mcp import serve

    return serve(args.store, args.device, args.http, args.cache_dir)
