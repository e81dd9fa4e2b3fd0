"""Harness integrity: the verifier's own files, and the packages every later process imports, are the ones it
started with.

A candidate that rewrote them (from a build step or a worker outside a sandbox, or through a hole in one) would
change every verdict after it, other candidates' too (classes 21 and 23 of REWARD_HACKS.md). The sandboxes mount
them read-only (containment.py); this is the check that they stayed so, in the trusted process. At the verifier's
start it records:

- kernelcraft's package: every file (.py, the prompts and other text) hashed (SHA-256) and stat'ed;
- torch's and Triton's Python files: stat'ed only (size, mtime, ctime, inode; hashing them would take seconds);
  a write changes the ctime, which no process can set back;
- the entries of every directory above, and of the directories a later interpreter reads at start-up (the
  standard library's, site-packages, the user's site-packages, the worker's PYTHONPATH): a new module, package or
  `.pth` file there would run in later processes too (`__pycache__` is left out: the interpreter writes it).

`check()` (after each evaluation and build, and every second while a build runs) stats everything again, and
hashes a kernelcraft file or lists a directory only where its stat changed. The first change found is kept: from
then on every check answers it, and the verifier refuses to judge (`verifier_error`, `harness_tampered`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
import time
from pathlib import Path

from kernelcraft.errors import HarnessTampered  # noqa: F401 - raised here, caught by the faces


def _stat(path: Path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _entries(path: Path) -> frozenset[str] | None:
    try:
        return frozenset(n for n in os.listdir(path) if n != "__pycache__")
    except OSError:
        return None


def _walk(root: Path, suffix: str | None):
    """(directories, files) under `root`, __pycache__ left out; files only those ending with `suffix` if given."""
    dirs, files = [], []
    for here, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if d != "__pycache__"]
        dirs.append(Path(here))
        files += [Path(here) / n for n in names if suffix is None or n.endswith(suffix)]
    return dirs, files


class Integrity:
    def __init__(self, hashed: list[Path] = (), stated: list[Path] = (), listed: list[Path] = ()):
        """`hashed`: trees whose files are hashed; `stated`: trees whose .py files are stat'ed; `listed`: directories
        whose entries are watched (the directories of both trees are, too)."""
        start = time.perf_counter()
        self._lock = threading.Lock()
        self._labels: dict[Path, Path] = {}  # a root -> the directory paths are named from
        self.files: dict[Path, tuple] = {}  # path -> (stat, digest or None)
        self.dirs: dict[Path, tuple] = {}  # path -> (stat, entries)
        for roots, suffix, hash_them in ((hashed, None, True), (stated, ".py", False)):
            for root in roots:
                root = Path(root).resolve()
                self._labels[root] = root.parent
                dirs, files = _walk(root, suffix)
                for d in dirs:
                    self.dirs[d] = (_stat(d), _entries(d))
                for f in files:
                    self.files[f] = (_stat(f), _digest(f) if hash_them else None)
        for d in listed:
            d = Path(d).resolve()
            if d.is_dir() and d not in self.dirs:
                self._labels.setdefault(d, d.parent)
                self.dirs[d] = (_stat(d), _entries(d))
        self.tampered: str | None = None
        self.setup_s = time.perf_counter() - start
        self.checks, self.check_s = 0, 0.0

    @classmethod
    def of_harness(cls) -> "Integrity":
        """kernelcraft (hashed), torch and Triton (stat'ed), and the directories a later interpreter imports from."""
        import site
        import sysconfig

        import kernelcraft

        package = Path(kernelcraft.__file__).parent
        stated = []
        for name in ("torch", "triton"):
            spec = importlib.util.find_spec(name)
            stated += [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
        listed = [package.parent, *site.getsitepackages(), sysconfig.get_paths()["stdlib"],
                  *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(p))]
        if site.ENABLE_USER_SITE:
            listed.append(site.getusersitepackages())
        return cls([package], stated, [Path(p) for p in listed])

    def _label(self, path: Path) -> str:
        for root, base in self._labels.items():
            if path == root or root in path.parents:
                return str(path.relative_to(base))
        return str(path)

    def _changed(self) -> str | None:
        for path, (stat, digest) in self.files.items():
            now = _stat(path)
            if now == stat:
                continue
            if now is None:
                return f"{self._label(path)} was removed"
            if digest is None or _digest(path) != digest:
                return f"{self._label(path)} was rewritten"
            self.files[path] = (now, digest)  # touched, the same bytes
        for path, (stat, entries) in self.dirs.items():
            now = _stat(path)
            if now == stat:
                continue
            listing = _entries(path)
            if listing != entries:
                added, gone = sorted((listing or frozenset()) - entries), sorted(entries - (listing or frozenset()))
                what = ", ".join([*(f"{n} added" for n in added), *(f"{n} removed" for n in gone)][:3])
                return f"{self._label(path)}{os.sep}: {what or 'no longer readable'}"
            self.dirs[path] = (now, entries)
        return None

    def check(self) -> str | None:
        """What changed since the start (a sentence naming the file), or None. Once something has, always that."""
        with self._lock:
            if self.tampered is None:
                start = time.perf_counter()
                changed = self._changed()
                self.checks += 1
                self.check_s += time.perf_counter() - start
                if changed:
                    self.tampered = f"{changed} on disk since the verifier started"
            return self.tampered

    def message(self) -> str:
        return (f"the harness changed: {self.tampered}; kernelcraft judges nothing more in this process (a candidate "
                "may have rewritten it: reinstall, or check the files, before trusting any verdict since)")
