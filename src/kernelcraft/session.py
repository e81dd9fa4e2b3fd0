"""One job's live pieces, owned together: the run store (opened here, or lent by the caller and left open), the
proposer and the verifier a RunSpec names. While they are built (`building`), anything raised closes what was built
so far; closing the session closes them all, once, in order: the verifier (cancelling its work on Ctrl-C), the
proposer, the store where it was opened here. The api's prepare_* functions build one and hand it to the job they
return; the job closes it when it ends."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from kernelcraft import assemble
from kernelcraft.assemble import SearchSettings
from kernelcraft.errors import ConfigError
from kernelcraft.problems import Problem
from kernelcraft.propose.base import Proposer
from kernelcraft.spec import RunSpec
from kernelcraft.store import Store
from kernelcraft.verify import JobFront


class Session:
    def __init__(self, store: Store | str | Path | None = None):
        """`store`: a Store (lent: left open), a path, or None for the default store."""
        self.owns_store = not isinstance(store, Store)
        self.store: Store = Store(store) if self.owns_store else store
        self._proposer: Proposer | None = None
        self._verifier: JobFront | None = None

    @property
    def proposer(self) -> Proposer:
        if self._proposer is None:
            raise RuntimeError("the session's proposer is not built (Session.build)")
        return self._proposer

    @property
    def verifier(self) -> JobFront:
        if self._verifier is None:
            raise RuntimeError("the session's verifier is not built (Session.build)")
        return self._verifier

    @contextmanager
    def building(self):
        """Everything raised inside closes the session: a job that cannot start leaves nothing open."""
        try:
            yield self
        except BaseException:
            self.close()
            raise

    def build(self, spec: RunSpec, s: SearchSettings, device: str, on_event=None, on: SearchSettings | None = None,
              problem: Problem | None = None) -> None:
        """The proposer and the verifier `spec` names (build_proposer, then build_verifier)."""
        self.build_proposer(spec, s, device)
        self.build_verifier(spec, s, on_event, on, problem)

    def build_proposer(self, spec: RunSpec, s: SearchSettings, device: str) -> Proposer:
        """The proposer `spec` names (the key, the endpoint and the prices from `s`; `device`: the first the job
        judges on, whose kind of device it writes for)."""
        _complete(spec)
        self._proposer = assemble.proposer(spec, s, device)
        return self._proposer

    def build_verifier(self, spec: RunSpec, s: SearchSettings, on_event=None, on: SearchSettings | None = None,
                       problem: Problem | None = None) -> JobFront:
        """The verifier `spec` describes (the cache from `s`; `on`: the settings that name a cluster to judge on, if
        any), `problem` admitted: one the device cannot hold is said now."""
        _complete(spec)
        self._verifier = assemble.verifier(spec.verify, s.cache_dir, on_event, on)
        if problem is not None:
            self._verifier.admit(problem)
        return self._verifier

    def close(self, cancel: bool = False) -> None:
        """Close what is open, once; each piece is closed even where one before it raised."""
        verifier, proposer, self._verifier, self._proposer = self._verifier, self._proposer, None, None
        store, self.owns_store = (self.store if self.owns_store else None), False
        try:
            if verifier is not None:
                verifier.close(cancel=cancel)
        finally:
            try:
                if proposer is not None:
                    proposer.close()
            finally:
                if store is not None:
                    store.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind, *exc) -> None:
        self.close(cancel=kind is not None and issubclass(kind, KeyboardInterrupt))


def _complete(spec: RunSpec) -> None:
    if spec.verify is None or spec.proposer is None:
        raise ConfigError("this run was started from Python without its verifier's and proposer's settings; resume "
                          "it from Python (search.resume_run) with the verifier and proposer it needs")
