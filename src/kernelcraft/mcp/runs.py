"""Optimization runs (and applies: a whole model) started by the MCP server, each driven by a thread of its own.

A run is made ready in the caller's thread (api.prepare_run: every setting checked, so bad input is the
tool's error), then driven in a daemon thread; its id is known once the store has the run's row, which
start() waits for. Candidate code still runs only in the verifier's worker subprocesses, as for the CLI.
Whatever the run raises is kept (and the run is stored as failed by the search), so the server goes on. A
server that exits with runs still going marks them stopped (`interrupted`), which `kernelcraft run
--resume RUN` continues.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path

from kernelcraft import api
from kernelcraft.errors import KernelcraftError
from kernelcraft.store import Store

CREATE_WAIT_S = 120.0  # for a prepared run to write its row (a run's first step; seconds at most in practice)


class _AnnouncingStore(Store):
    """A Store that tells, through a future, the id of the run (or the apply) created in it first."""

    def __init__(self, path, kind: str = "run"):
        super().__init__(path)
        self.kind = kind
        self.created: Future = Future()

    def create_run(self, run_id, *args, **kwargs):
        super().create_run(run_id, *args, **kwargs)
        if self.kind == "run" and not self.created.done():
            self.created.set_result(run_id)

    def create_apply(self, apply_id, *args, **kwargs):
        super().create_apply(apply_id, *args, **kwargs)
        if self.kind == "apply" and not self.created.done():
            self.created.set_result(apply_id)

    def finish(self, the_id: str, message: str) -> None:
        """Close a run or apply its driver left running (it raised before it could)."""
        if self.kind == "apply":
            if self.apply(the_id)["status"] == "running":
                self.update_apply(the_id, "failed", None)
            return
        row = self.run(the_id)
        if row["status"] == "running":
            self.finish_run(the_id, "failed", f"server_error: {message}", row["best_candidate"])


class Runs:
    """The runs this server started: their threads, live progress and any error they ended on."""

    def __init__(self, store_path: Path, cache_dir: Path | None = None):
        self.store_path = Path(store_path)
        self.cache_dir = cache_dir
        self._lock = threading.Lock()
        self._threads: dict[str, threading.Thread] = {}
        self._live: dict[str, dict] = {}
        self._reader: Store | None = None

    def reader(self) -> Store:
        """The server's one connection for reading the store (the runs write through their own)."""
        with self._lock:
            if self._reader is None:
                if not self.store_path.is_file():
                    raise KernelcraftError(f"no run store at {self.store_path} yet: start_run creates it")
                self._reader = Store(self.store_path)
            return self._reader

    def start(self, problem, **options) -> str:
        """Start a run in the background; its id once it is in the store. Bad settings raise here."""
        return self._start("run", lambda store, hear: api.prepare_run(problem, store=store, out_dir=None,
                                                                       on_event=hear, **options), options)

    def start_apply(self, problem, out_dir=None, **options) -> str:
        """Start an apply (kernelcraft apply) in the background; its id once it is in the store."""
        return self._start("apply", lambda store, hear: api.prepare_apply(problem, store=store, out_dir=out_dir,
                                                                           on_event=hear, **options), options)

    def _start(self, kind: str, prepare, options: dict) -> str:
        if self.cache_dir and not options.get("cache_dir"):
            options["cache_dir"] = self.cache_dir
        store = _AnnouncingStore(self.store_path, kind)
        live = {"round": None, "last_event": None, "thread_error": None}
        try:
            prepared = prepare(store, self._hearer(live))
        except BaseException:
            store.close()
            raise
        thread = threading.Thread(target=self._drive, args=(prepared, store, live), daemon=True,
                                  name=f"kernelcraft-{kind}")
        thread.start()
        try:
            run_id = store.created.result(timeout=CREATE_WAIT_S)
        except TimeoutError:
            raise KernelcraftError(f"the {kind} did not start within {CREATE_WAIT_S:g} s; see the server's "
                                   "log") from None
        with self._lock:
            self._threads[run_id] = thread
            self._live[run_id] = live
        return run_id

    @staticmethod
    def _hearer(live: dict):
        def hear(kind: str, data: dict) -> None:
            if kind == "round":
                live["round"] = data.get("round")
            live["last_event"] = kind

        return hear

    def _drive(self, prepared, store: _AnnouncingStore, live: dict) -> None:
        try:
            prepared.run(self._hearer(live))
        except BaseException as exc:  # noqa: BLE001 - a run's failure is its own; the server goes on
            message = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
            live["thread_error"] = message
            if not store.created.done():  # it failed before its row was written: start() raises this
                store.created.set_exception(KernelcraftError(f"the {store.kind} could not start: {message}"))
            elif store.created.exception() is None:  # a run the search could not close is closed here
                store.finish(store.created.result(), message)
        finally:  # prepared.run closed its verifier and proposer; the store was given, so it is ours to close
            store.close()

    def live(self, run_id: str) -> dict | None:
        """What this server knows of a run it drives beyond the store: the round heard, its thread's error."""
        with self._lock:
            live, thread = self._live.get(run_id), self._threads.get(run_id)
        if live is None:
            return None
        return {"live_round": live["round"], "driven_here": True,
                "thread_alive": bool(thread and thread.is_alive()), "thread_error": live["thread_error"]}

    def active(self) -> list[str]:
        with self._lock:
            return [rid for rid, t in self._threads.items() if t.is_alive()]

    def shutdown(self) -> None:
        """Runs still going when the server exits are stored as stopped (interrupted), so they can resume."""
        active = self.active()
        if active and self.store_path.is_file():
            store = Store(self.store_path)
            try:
                for run_id in active:
                    row = store.run(run_id)
                    if row["status"] == "running":
                        store.finish_run(run_id, "stopped", "interrupted", row["best_candidate"])
            finally:
                store.close()
        with self._lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None
