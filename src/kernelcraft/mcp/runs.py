"""Optimization runs (and applies: a whole model) started by the MCP server, each driven by a thread of its own.

A run is made ready in the caller's thread (api.prepare_run: every setting checked, so bad input is the
tool's error), then driven in a daemon thread; its id is known once it says it started (its row is written then:
the `run_started` event, an apply's first `apply_stage`), which start() waits for. Candidate code still runs only
in the verifier's worker subprocesses, as for the CLI. Whatever the run raises is kept (and the run is stored as failed by the search), so the server goes on. A
server that exits with runs still going marks them stopped (`interrupted`), which `kernelcraft run
--resume RUN` continues.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING

from kernelcraft import api
from kernelcraft.errors import KernelcraftError

if TYPE_CHECKING:
    from kernelcraft.store import Store

CREATE_WAIT_S = 120.0  # for a prepared run to write its row (a run's first step; seconds at most in practice)
# The event that names what was started, by kind: a run's, and an apply's first stage (its row is written then).
STARTED = {"run": ("run_started", "run_id"), "apply": ("apply_stage", "apply_id")}


class Runs:
    """The runs this server started: their threads, live progress and any error they ended on."""

    def __init__(self, store_path: Path, cache_dir: Path | None = None):
        self.store_path = Path(store_path)
        self.cache_dir = cache_dir
        self._lock = threading.Lock()
        self._threads: dict[str, threading.Thread] = {}
        self._live: dict[str, dict] = {}
        self._kinds: dict[str, str] = {}  # id -> "run" or "apply"
        self._reader: Store | None = None

    def reader(self) -> Store:
        """The server's one connection for reading the store (the runs write through their own); the api's
        functions take it as their `store`."""
        with self._lock:
            if self._reader is None:
                if not self.store_path.is_file():
                    raise KernelcraftError(f"no run store at {self.store_path} yet: start_run creates it")
                self._reader = api.open_store(self.store_path)
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
        created: Future = Future()  # the id of the run or apply, once its row is written
        live = {"round": None, "last_event": None, "thread_error": None}
        hear = self._hearer(live, kind, created)
        prepared = prepare(self.store_path, hear)  # bad settings raise here
        thread = threading.Thread(target=self._drive, args=(prepared, kind, created, live, hear), daemon=True,
                                  name=f"kernelcraft-{kind}")
        thread.start()
        try:
            the_id = created.result(timeout=CREATE_WAIT_S)
        except TimeoutError:
            raise KernelcraftError(f"the {kind} did not start within {CREATE_WAIT_S:g} s; see the server's "
                                   "log") from None
        with self._lock:
            self._threads[the_id], self._live[the_id], self._kinds[the_id] = thread, live, kind
        return the_id

    @staticmethod
    def _hearer(live: dict, kind: str, created: Future):
        started, key = STARTED[kind]

        def hear(event: str, data: dict) -> None:
            if event == started and not created.done():  # the first: a bench's or an apply's runs come later
                created.set_result(data[key])
            if event == "round":
                live["round"] = data.get("round")
            live["last_event"] = event

        return hear

    def _drive(self, prepared, kind: str, created: Future, live: dict, hear) -> None:
        try:
            prepared.run(hear)  # its store, verifier and proposer are its own, closed as it ends
        except BaseException as exc:  # noqa: BLE001 - a run's failure is its own; the server goes on
            message = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
            live["thread_error"] = message
            if not created.done():  # it failed before its row was written: start() raises this
                created.set_exception(KernelcraftError(f"the {kind} could not start: {message}"))
            elif created.exception() is None:  # a run the search could not close is closed here
                api.close_unfinished(kind, created.result(), message, store=self.store_path)

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
        active = [the_id for the_id in self.active() if self._kinds.get(the_id) == "run"]
        if active and self.store_path.is_file():
            api.stop_runs(active, store=self.store_path)
        with self._lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None
