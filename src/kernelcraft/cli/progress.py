"""The live progress line of `kernelcraft run` and `bench`, on stderr: round, verified candidates, the best
speedup, calls, tokens, the devices busy and idle where there are several, and a wait for a device another
process is timing on."""

from __future__ import annotations

import time

from kernelcraft.cli.common import console
from kernelcraft.metrics import times
from kernelcraft.records import UNEVALUATED


_STAGES = {"capture": "capturing the model and cutting it into regions", "profile": "timing the model and its regions",
           "baselines": "timing the model eager and under torch.compile (its baselines, kept for the end)",
           "graphs": "verifying torch.compile of the model with CUDA graphs (the model is host-bound)",
           "verify": "reassembling the model with its faster regions"}


class Progress:
    """A live line on stderr: round, candidates verified, best speedup, tokens and cost."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.state = {"round": 0, "verified": 0, "ok": 0, "best": None, "tokens": 0, "calls": 0, "problem": "",
                      "errors": 0, "waiting": "", "devices": ""}
        self.live = None
        self.console = None
        self.t0 = time.monotonic()

    def __enter__(self):
        self.console = console(stderr=True)
        if not self.quiet and self.console.is_terminal:
            from rich.live import Live

            self.live = Live(self._render(), console=self.console, refresh_per_second=4)
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live:
            self.live.update(self._render())
            self.live.__exit__(*exc)
        elif not self.quiet:
            self.console.print(self._render())

    def event(self, kind: str, data: dict) -> None:
        s = self.state
        if kind == "round":
            s["round"] = data["round"]
        elif kind == "call":
            s["calls"] += 1
            s["tokens"] += data.get("tokens") or 0
            s["errors"] += bool(data.get("error"))
        elif kind == "lock_wait":  # from the verifier's thread: another process is timing on the device
            s["waiting"] = " · waiting for the device (another evaluation is timing on it)"
        elif kind == "candidate":
            s["waiting"] = ""
            s["verified"] += data["status"] not in UNEVALUATED
            s["ok"] += data["status"] == "ok"
            s["best"] = data.get("best_speedup") or s["best"]
        elif kind == "apply_region":  # kernelcraft apply: a region's run starts
            minutes = f", {data['minutes']:.1f} min" if data.get("minutes") else ""
            s.update(problem=f"[region {data['index'] + 1}/{data['total']}] {data['region']} "
                             f"({data['share']:.0%} of the model{minutes})  ", round=0, best=None, verified=0, ok=0)
        elif kind == "devices":  # the verifier's devices: shown where there are several (GPUs, a cluster's actors)
            several = data["busy"] + data["idle"] > 1 or data["lost"]
            s["devices"] = (f" · devices {data['busy']} busy, {data['idle']} idle, {data['queued']} queued"
                            if several else "")
        elif kind == "problem":
            s.update(problem=f"[{data['index'] + 1}/{data['total']}] {data['problem']}  ", round=0, best=None,
                     verified=0, ok=0)  # a problem's counts are its own; calls and tokens add up over the bench
        if self.quiet:
            return
        # A stop because the proposer cannot answer is said once, with its error, when the run ends.
        if kind == "stop" and not data["reason"].startswith(("proposer_error", "proposer_failing")):
            self.console.print(f"[yellow]stop:[/] {data['reason']}")
        elif kind == "actor_lost":  # a cluster's verifier actor: its candidates go back to the queue
            again = f"; {data['requeued']} candidates put back in the queue" if data.get("requeued") else ""
            self.console.print(f"[yellow]cluster:[/] lost {data['device']} ({data['error']}){again}")
        elif kind == "cluster":
            self.console.print(f"cluster: {data['message']}")
        elif kind == "note":
            self.console.print(f"[yellow]note:[/] {data['message']}")
        elif kind == "apply_stage":
            self.console.print(f"apply ({self._clock()}): {_STAGES.get(data['stage'], data['stage'])}"
                               + (f" ({', '.join(data['replaced'])})" if data.get("replaced") else ""))
        elif kind == "apply_profile":  # where the model's time goes, before the regions' runs start
            from kernelcraft.report.apply import profile_view

            self.console.print(profile_view(data))
        elif kind == "withdrawn":  # the run's wall budget ran out with candidates still queued
            self.console.print(f"[yellow]stop:[/] {data['count']} queued candidates not judged (the budget ran out)")
        elif kind == "apply_verify" and data.get("baseline"):
            pass  # the "graphs" stage said it
        elif kind == "apply_verify":
            form = " under torch.compile" if data.get("compiled") else ""
            form += " with CUDA graphs" if data.get("graphs") else ""
            self.console.print(f"apply ({self._clock()}): verifying the model{form} with {len(data['regions'])} "
                               "regions replaced")
        elif kind == "target":
            self.console.print(f"target: {data['summary']}")
        if kind == "profile_off":  # --profile, on a machine that cannot: the run goes on without counters
            self.console.print(f"[yellow]profile:[/] {data['message']}; the run goes on without hardware counters")
        if self.live:
            self.live.update(self._render())
        elif kind in ("round", "problem", "lock_wait", "apply_region"):  # not a terminal (a log file, CI): one line per step
            self.console.print(self._render())

    def _clock(self) -> str:
        return f"{time.monotonic() - self.t0:.0f} s"

    def _render(self):
        from rich.text import Text

        s = self.state
        best = f"{times(s['best'])} eager" if s["best"] else "none yet"
        return Text(f"{s['problem']}round {s['round']} · verified {s['verified']} ({s['ok']} ok) · best {best} · "
                    f"{s['calls']} calls ({s['errors']} failed), {s['tokens']:,} tokens · "
                    f"{time.monotonic() - self.t0:.0f} s{s['devices']}{s['waiting']}")
