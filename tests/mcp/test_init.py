"""`kernelcraft mcp` without the SDK, its options, and its floor (a face over api: never the CLI)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kernelcraft.mcp import parse_http
from tests.helpers import REPO


def run(args, tmp_path, pythonpath):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath)), "KERNELCRAFT_HOME": str(tmp_path / "r.db")}
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, stdin=subprocess.DEVNULL)


def test_without_the_sdk_it_says_how_to_install_it(tmp_path):
    blocked = tmp_path / "blocked" / "mcp"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('no MCP SDK here')\n")
    for args in (["-m", "kernelcraft", "mcp"], ["-m", "kernelcraft.mcp", "--device", "cpu"]):
        proc = run(args, tmp_path, [tmp_path / "blocked", REPO / "src"])
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.strip().splitlines() == [
            "kernelcraft mcp needs the MCP SDK: pip install 'kernelcraft[mcp]' (or: pip install mcp)"]


def test_a_bad_http_address_is_a_usage_error(tmp_path):
    proc = run(["-m", "kernelcraft", "mcp", "--http", "localhost"], tmp_path, [REPO / "src"])
    assert proc.returncode == 2 and "give HOST:PORT" in proc.stderr and proc.stdout == ""
    assert parse_http("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_http(":9000") == ("127.0.0.1", 9000) and parse_http("[::1]:80") == ("::1", 80)
    with pytest.raises(ValueError, match="1-65535"):
        parse_http("h:70000")


def test_the_server_stands_on_api_not_on_the_cli(tmp_path):
    pytest.importorskip("mcp.server.mcpserver", reason="the MCP SDK (kernelcraft[mcp]) is not installed")
    code = ("import sys; import kernelcraft.mcp.server as s; "
            "print(sorted(m for m in sys.modules if m.startswith('kernelcraft.cli')), 'kernelcraft.api' in sys.modules)")
    proc = run(["-c", code], tmp_path, [REPO / "src"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[]", "True"]
