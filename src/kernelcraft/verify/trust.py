"""Trusted caches: the ones a verdict rests on (baselines, build outcomes, the RL scorer's verdicts), kept where no
candidate can reach them and authenticated, so that an entry no trusted process wrote is never believed.

- Where: `trusted_dir(cache_dir)` (`cache_dir/trusted/`). Every process that runs candidate code (workers, the
  fork server and its children, build processes) sees an empty read-only tmpfs there instead (process.sandbox_paths,
  containment.containment), and its mounts are locked, so it can neither read nor write the directory.
- What: each entry carries an HMAC-SHA256 over its kind, its name and its content (`Trust.seal` / `Trust.opens`),
  keyed by the user's key, `key_dir()/key` (32 random bytes, mode 0600, created atomically on first use: written
  to a private name and linked into place, so a reader never sees half a key). One key for every cache dir, in one
  place every sandbox hides: a candidate judged with one cache dir can find another's trusted directory (a search
  of the disk), but not the key that would make what it writes there believed. An entry whose MAC does not verify
  is treated as absent (measured, built or judged again) and counted (`Trust.rejected`); one without a MAC (a file
  written by an older kernelcraft, or in the directory before it was trusted) is not trusted either.
- Where no directory can be hidden from candidates (no user and mount namespace here, KERNELCRAFT_NO_SANDBOX, or a
  verifier with its sandbox off), a key on disk would be readable by any candidate of the same user: the key is
  then one drawn at random for this process (`shared=False`), so entries written by other processes are not
  trusted, and a key on disk is deleted (its candidates could have read it: an entry sealed with it is no longer
  proof of anything). `Trust.note` says which.

Limits, said rather than pretended: a candidate run outside the namespaces (the Nsight Compute profiler's target,
verify/profile/runner.py) could read the key: `burn_key` is called after such a run. Without namespaces nothing
stops a candidate from reading this process's memory (same user); the per-process key only stops entries planted
across processes.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import json
import os
import secrets
import threading
from pathlib import Path

KEY_BYTES = 32
_PROCESS_KEY = secrets.token_bytes(KEY_BYTES)  # shared=False: the key of this process only
_known: dict[Path, None] = {}  # every trusted directory this process holds a Trust over (hidden in every sandbox)
_known_lock = threading.Lock()


def trusted_dir(cache_dir: str | Path) -> Path:
    return Path(cache_dir) / "trusted"


def key_dir() -> Path:
    """Where the user's key is: $KERNELCRAFT_TRUST_DIR, else the default cache's trusted directory."""
    return Path(os.environ.get("KERNELCRAFT_TRUST_DIR") or trusted_dir(Path.home() / ".cache" / "kernelcraft"))


def known_dirs() -> list[Path]:
    """The trusted directories of this process that still exist (process.sandbox_paths hides each one)."""
    with _known_lock:
        return [d for d in _known if d.is_dir()]


def burn_key(directory: str | Path | None = None) -> bool:
    """Delete the key in `directory` (default: the user's, key_dir()): a candidate could have read it; entries
    sealed with it are trusted no more by the processes that read the key from now on. True if there was one."""
    try:
        (Path(directory or key_dir()) / "key").unlink()
        return True
    except FileNotFoundError:
        return False


def _read_key(path: Path) -> bytes:
    with open(path, "rb") as f:
        key = f.read()
    if len(key) != KEY_BYTES:
        raise ValueError(f"{path} is not a kernelcraft key ({len(key)} bytes)")
    return key


def load_key(directory: Path) -> bytes:
    """The key in `directory`, created if absent: written under a private name (O_EXCL, 0600) and linked to `key`,
    which fails if another process linked its own first (then that one is read)."""
    path = directory / "key"
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = directory / f".key.{os.getpid()}.{secrets.token_hex(6)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, secrets.token_bytes(KEY_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return _read_key(path)


class Trust:
    """Seals and opens the entries of the caches in one trusted directory."""

    def __init__(self, directory: str | Path, shared: bool | None = None, key_directory: str | Path | None = None,
                 hide: bool = True):
        """`shared`: the user's key on disk, in `key_directory` (default key_dir()), for every process (True), or
        this process's own (False). None: shared where candidates run in namespaces that hide both directories
        (containment.can_hide). `hide`: hide `directory` from every sandbox started from now on (its entries are
        sealed either way; a directory that is not a trusted one, such as a test's, is better left visible)."""
        from kernelcraft.verify.containment import can_hide

        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.key_directory = Path(key_directory or key_dir())
        self.shared = can_hide() if shared is None else shared
        self.rejected: collections.Counter[str] = collections.Counter()  # kind -> entries refused
        self._lock = threading.Lock()
        self.note = ""
        if self.shared:
            try:
                self._key = load_key(self.key_directory)
            except (OSError, ValueError) as exc:
                self.shared = False
                self.note = f"trusted caches: no key could be kept in {self.key_directory} ({exc}): "
        if not self.shared:
            self._key = _PROCESS_KEY
            burned = burn_key(self.key_directory)
            self.note = (self.note or "trusted caches: candidates here could read a key on disk (no namespace hides "
                         "it), so ") + "only entries this process wrote are trusted" + \
                (" (the key on disk was deleted)" if burned else "")
        with _known_lock:
            if hide:
                _known[self.directory.resolve()] = None
            if self.shared:
                _known[self.key_directory.resolve()] = None

    def rotate(self) -> None:
        """A new key (a candidate may have read this one): nothing sealed so far is trusted from now on."""
        with self._lock:
            if self.shared:
                burn_key(self.key_directory)
                self._key = load_key(self.key_directory)
            else:
                self._key = secrets.token_bytes(KEY_BYTES)

    def mac(self, kind: str, name: str, content: str) -> str:
        message = json.dumps([kind, name, content]).encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def seal(self, kind: str, name: str, content: str) -> str:
        """The MAC to store beside `content`, the entry `name` of the cache `kind`."""
        return self.mac(kind, name, content)

    def opens(self, kind: str, name: str, content: str, mac: str | None) -> bool:
        """Whether `mac` proves that a trusted process wrote `content` as entry `name` of `kind`; a refusal is
        counted."""
        if isinstance(mac, str) and hmac.compare_digest(self.mac(kind, name, content), mac):
            return True
        with self._lock:
            self.rejected[kind] += 1
        return False

    # JSON entries: {"entry": ..., "mac": ...}
    def seal_json(self, kind: str, name: str, entry) -> dict:
        return {"entry": entry, "mac": self.seal(kind, name, canonical(entry))}

    def open_json(self, kind: str, name: str, sealed):
        """The entry of a sealed record, or None where the record is not one this Trust can authenticate."""
        if not isinstance(sealed, dict) or "entry" not in sealed:
            self.opens(kind, name, "", None)  # counted
            return None
        return sealed["entry"] if self.opens(kind, name, canonical(sealed["entry"]), sealed.get("mac")) else None

    def refusals(self) -> int:
        with self._lock:
            return sum(self.rejected.values())


def canonical(entry) -> str:
    return json.dumps(entry, sort_keys=True, separators=(",", ":"))


def for_verifier(cache_dir: str | Path, sandbox: bool) -> Trust:
    """The Trust of a verifier's caches: the user's key only if its candidates run sandboxed where the directories
    can be hidden."""
    from kernelcraft.verify.containment import can_hide

    return Trust(trusted_dir(cache_dir), shared=sandbox and can_hide())
