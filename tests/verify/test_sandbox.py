"""What a sandboxed process can and cannot do (containment.containment, process.sandbox_paths, harden): checked by
running one, where this machine has user and mount namespaces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcraft.verify.build import build_paths
from kernelcraft.verify.containment import can_hide, containment
from kernelcraft.verify.process import sandbox_paths
from kernelcraft.verify.trust import trusted_dir

pytestmark = pytest.mark.skipif(not can_hide(), reason="no user and mount namespace on this machine")

PROBE = r'''
import json, os, subprocess, sys
from pathlib import Path

def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return exc.strerror

def write(path):
    return lambda: Path(path).write_text("x")

out = {name: attempt(write(path)) for name, path in json.loads(sys.argv[1]).items()}
out["read key"] = attempt(lambda: Path(sys.argv[2]).read_bytes())
out["unmount"] = subprocess.run(["umount", str(Path(sys.argv[2]).parent)], capture_output=True).returncode
out["remount"] = subprocess.run(["mount", "-o", "remount,rw", sys.argv[3]], capture_output=True).returncode
print(json.dumps(out))
'''


def probe(box, writes: dict, key: Path, read_only: Path) -> dict:
    proc = subprocess.run([*box.prefix, sys.executable, "-c", PROBE, json.dumps({k: str(v) for k, v in writes.items()}),
                           str(key), str(read_only)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def place(tmp_path):
    installed = tmp_path / "installed" / "torchish"  # stands for site-packages
    installed.mkdir(parents=True)
    cache = tmp_path / "cache"
    (trusted_dir(cache)).mkdir(parents=True)
    (trusted_dir(cache) / "key").write_bytes(b"k" * 32)
    (cache / "inline" / "other-candidate").mkdir(parents=True)
    (cache / "inline" / "mine").mkdir(parents=True)
    return tmp_path, installed, cache


def test_the_harness_and_every_installed_package_are_in_a_workers_read_only_set(tmp_path):
    import site

    import kernelcraft
    import torch

    read_only, writable, hidden = sandbox_paths(cache_dir=tmp_path / "cache")
    for path in (Path(kernelcraft.__file__).parent, Path(torch.__file__).parent, *map(Path, site.getsitepackages()),
                 tmp_path / "cache" / "inline"):
        assert path.resolve() in {p.resolve() for p in read_only}, path
    assert trusted_dir(tmp_path / "cache") in hidden and tmp_path / "cache" in writable


def test_a_worker_writes_no_read_only_path_and_never_sees_the_trusted_caches(place):
    """Read-only paths stand in for the harness and site-packages here (planted: a failing defence writes there)."""
    tmp_path, installed, cache = place
    read_only, writable, hidden = sandbox_paths(cache_dir=cache)
    box = containment([*read_only, installed], writable, hidden)
    seen = probe(box, {"installed": installed / "evil.pth", "inline": cache / "inline" / "other-candidate" / "x.so",
                       "cache": cache / "scratch", "trusted": trusted_dir(cache) / "baselines.json"},
                 trusted_dir(cache) / "key", installed)
    assert seen["installed"] == seen["inline"] == seen["trusted"] == "Read-only file system", seen
    assert seen["cache"] == "ok"
    assert seen["read key"] == "No such file or directory", seen  # an empty tmpfs over the trusted directory
    assert seen["unmount"] != 0 and seen["remount"] != 0  # the mounts are locked


def test_a_build_writes_its_own_part_of_the_inline_cache_and_its_private_directory_only(place):
    tmp_path, installed, cache = place
    private = tmp_path / "private"
    private.mkdir()
    read_only, writable, hidden = build_paths(private, cache / "inline" / "mine", cache)
    box = containment([*read_only, installed], writable, hidden)
    home = Path.home() / f".kernelcraft-probe-{tmp_path.name}"
    try:
        seen = probe(box, {"own": cache / "inline" / "mine" / "x.so", "private": private / "x", "tmp": tmp_path / "x",
                           "other": cache / "inline" / "other-candidate" / "x", "cache": cache / "scratch",
                           "home": home}, trusted_dir(cache) / "key", installed)
    finally:
        home.unlink(missing_ok=True)
    assert seen["own"] == seen["private"] == "ok", seen
    assert {seen[k] for k in ("other", "cache", "tmp", "home")} == {"Read-only file system"}, seen
    assert seen["read key"] == "No such file or directory"


HARDENED = r'''
import os, sys, time
from kernelcraft.verify.containment import harden
harden()
sibling = os.fork()
if sibling == 0:
    time.sleep(10)
    os._exit(0)
child = os.fork()
if child == 0:
    seen = []
    for pid in (os.getppid(), sibling):
        for what in ("mem", "root/"):
            try:
                open(f"/proc/{pid}/{what}", "rb").close() if what == "mem" else os.listdir(f"/proc/{pid}/{what}")
                seen.append("open")
            except OSError:
                seen.append("denied")
    print(" ".join(seen))
    sys.stdout.flush()
    os._exit(0)
os.waitpid(child, 0)
os.kill(sibling, 9)
'''


def test_after_harden_a_forked_child_cannot_reach_its_server_or_a_sibling():
    """The fork server's case: a candidate in one child, the server and a baseline worker beside it."""
    box = containment(*sandbox_paths())
    proc = subprocess.run([*box.prefix, sys.executable, "-c", HARDENED], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["denied"] * 4, (proc.stdout, proc.stderr)
