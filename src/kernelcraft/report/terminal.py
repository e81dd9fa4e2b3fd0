"""Rich renderables for the terminal. They are built here and printed by the CLI. (Past 400 lines: one small view
per face of the report, sharing the cell formatters above them; split by view, each file would import them all.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from kernelcraft.report.data import mixed_devices
from kernelcraft.result import Result

if TYPE_CHECKING:
    from kernelcraft.search.run import RunOutcome

_STYLE = {"ok": "bold green", "incorrect": "bold red", "rejected": "bold magenta",
          "compile_error": "bold yellow", "runtime_error": "bold red", "timeout": "bold yellow"}


def _host(t) -> str:
    """Where a call's cost is not its timed median, which it is and the median beside it."""
    if t.cost_ms == t.median_ms:
        return ""
    return f" ({'host' if t.cost_ms == t.host_ms else 'device'} time a call; median {_ms(t.median_ms)})"


def _ms(value) -> str:
    return "—" if value is None else (f"{value:.4f} ms" if value < 1 else f"{value:.3f} ms")


def _x(value) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}×" if value >= 0.1 else f"{value:.2g}×"  # CPU runs can be 1000× slower than eager


def _sizes_word(sizes: dict) -> str:
    """", full sizes", ", SMALL_SIZES" or ", derived sizes batch_size=16 (full: 4096)" for a verdict's sizes."""
    if not sizes or not sizes.get("source"):
        return ""
    from kernelcraft.problems.sizes import Sizes

    try:
        return ", " + Sizes(sizes.get("constants") or {}, sizes["source"], sizes.get("full") or {},
                            sizes.get("note", "")).describe()
    except TypeError:  # a record from before the sizes were kept so
        return ""


def result_view(r: Result) -> Group:
    head = Text.assemble((r.status.upper(), _STYLE.get(r.status, "bold")),
                         f"  {r.candidate} ({r.backend}) on {r.problem}  [{r.device}, policy {r.policy}"
                         f"{_sizes_word(r.sizes)}]")
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="dim")
    table.add_column()
    if r.reasons:
        table.add_row("reasons", ", ".join(r.reasons))
    table.add_row("trials passed", str(r.trials))
    if r.max_rel_error is not None:
        table.add_row("max rel. error", f"{r.max_rel_error:.3g}")
    if r.compile_seconds is not None:
        table.add_row("compile", f"{r.compile_seconds:.3f} s")
    if r.runtime:
        table.add_row("candidate", f"{_ms(r.runtime_ms)}{_host(r.runtime)}  (IQR {_ms(r.runtime.iqr_ms)}, "
                      f"CV {r.runtime.cv:.2%}, n={r.runtime.samples}, {r.runtime.method})")
    if r.eager:
        cached = "  (cached)" if r.baseline_cached else ""
        table.add_row("PyTorch eager", f"{_ms(r.eager_ms)}{_host(r.eager)}{cached}")
    if r.compiled:
        table.add_row("torch.compile", f"{_ms(r.compile_ms)}{_host(r.compiled)}")
    if r.runtime:
        table.add_row("speedup", f"{_x(r.speedup_eager)} vs eager, {_x(r.speedup_compile)} vs compile")
    if r.roofline_fraction is not None:
        table.add_row("roofline", f"{r.roofline_fraction:.1%} of the floor ({_ms(r.roofline_ms)})")
    for res in r.kernels_resources:
        spilled = (f"{res['local']} B local (stack and spills)" if "local" in res
                   else f"{res.get('spill_stores', 0)} B spilled")
        table.add_row("kernel", f"{res.get('kernel')}: {res.get('registers', '?')} regs, {res.get('smem', 0)} B smem, "
                      + spilled)
    table.add_row("wall", f"{r.wall_seconds:.1f} s")
    if r.runtime and r.runtime.method.startswith("cpu"):
        table.add_row("note", "CPU timings (no GPU was used)")
    parts = [head, table]
    if r.message:
        parts.append(Panel(r.message[-3000:], title="details", border_style="dim"))
    if r.status == "compile_error" and r.compile_log:
        parts.append(Panel(r.compile_log[-3000:], title="compile log", border_style="yellow"))
    for note in r.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    return Group(*parts)


def _share(value) -> str:
    return "—" if value is None else f"{value:.0f}%"


def counters_table(profile: dict, title: str) -> Table:
    """A stored profile (verify/profile) as a table: the top kernels, their figures and verdicts."""
    head, _, _ = (profile.get("summary") or "").partition("\n")
    table = Table(title=title, title_justify="left", caption=head, caption_justify="left")
    for col in ("kernel", "time", "DRAM", "SM", "occupancy", "L2 hit", "bank conflicts", "verdict"):
        table.add_column(col, justify="left" if col in ("kernel", "verdict") else "right",
                         overflow="fold", no_wrap=col in ("time",))
    for k in profile["kernels"][:3]:
        dram = _share(k.get("dram_pct")) + (f" ({k['dram_gbps']:.0f} GB/s)" if k.get("dram_gbps") is not None else "")
        occupancy = f"{_share(k.get('achieved_occupancy_pct'))} / {_share(k.get('theoretical_occupancy_pct'))}"
        conflicts = "—" if k.get("conflict_ratio") is None else f"{100 * k['conflict_ratio']:.0f}%"
        table.add_row(k["short"][:60] + (" (yours)" if k.get("custom") else ""),
                      f"{100 * k['share']:.0f}% · {_ms(k['time_us'] / 1e3)}", dram, _share(k.get("sm_pct")), occupancy,
                      _share(k.get("l2_hit_pct")), conflicts, k.get("verdict") or "")
    return table


def _stall_lines(profile: dict) -> list[Text]:
    """What the top kernels' warps wait on (the table has no room for it)."""
    return [Text(f"{k['short'][:60]} stalls: " + "; ".join(f"{s['words']} {100 * s['share']:.0f}%" for s in k["stalls"]),
                 style="dim") for k in profile["kernels"][:3] if k.get("stalls")]


def profile_view(info: dict) -> Group:
    """`kernelcraft profile`: the candidate's counters, the reference's beside them."""
    p, ref = info["profile"], info.get("reference")
    parts = [Text.assemble(("profile", "bold"), f"  {info['candidate']} ({info['backend']}) on {info['problem']}  "
                           f"[{p['device'] or info['device']}, ncu {p['ncu']}]"),
             counters_table(p, "the candidate"), *_stall_lines(p)]
    if ref:
        parts += [counters_table(ref, "the reference (PyTorch eager)"), *_stall_lines(ref)]
        parts.append(Text(f"kernel time under ncu: candidate {_ms(p['total_us'] / 1e3)}, reference "
                          f"{_ms(ref['total_us'] / 1e3)} (each kernel replayed with caches flushed: not the timed "
                          "runtime)", style="dim"))
    elif info.get("reference_error"):
        parts.append(Text(f"the reference was not profiled: {info['reference_error']}", style="yellow"))
    return Group(*parts)


def problem_list_view(rows: list[dict]) -> Table:
    table = Table(title=f"{len(rows)} problems")
    table.add_column("name", style="cyan")
    table.add_column("what")
    for row in rows:
        table.add_row(row["name"], row["summary"])
    return table


def problem_view(info: dict) -> Group:
    table = Table(show_header=False, box=None)
    table.add_column(style="dim")
    table.add_column()
    table.add_row("file", info["path"])
    if info.get("sizes_text"):
        table.add_row("sizes", info["sizes_text"])
    table.add_row("FLOPs", f"{info['flops']:.4g}  (matmul/conv/attention: {info['matmul_flops']:.4g})")
    table.add_row("bytes (floor)", f"{info['bytes']:.4g}")
    table.add_row("intensity", f"{info['intensity']:.2f} FLOP/byte")
    for spec in info["inputs"]:
        table.add_row("input", f"{tuple(spec['shape'])} {spec['dtype']}")
    for spec in info["outputs"]:
        table.add_row("output", f"{tuple(spec['shape'])} {spec['dtype']}")
    return Group(Text(info["name"], style="bold cyan"), table, Syntax(info["source"], "python", line_numbers=False))


def run_view(run: "RunOutcome", show_error: bool = True) -> Group:
    """A search run: its trajectory by round, what its candidates came to, and the best kernel. `show_error`:
    the line saying why the proposer stopped the run (the `run` command says it on stderr instead)."""
    c = run.counters
    head = Text.assemble((f"run {run.run_id}", "bold"), f"  {run.problem} · {run.strategy} · "
                         f"{run.proposer} · {run.device} · {run.status}")
    if run.stop_reason:  # the reason's name: its detail, a proposer's error, is the error line's
        head.append(f" ({run.stop_reason.partition(': ')[0] if run.error else run.stop_reason})", style="yellow")
    rounds = Table(title="best kernel by round", title_justify="left")
    for col in ("round", "tried", "correct", "best", "× eager", "× compile", "idea"):
        rounds.add_column(col, justify="right" if col not in ("idea",) else "left")
    for t in run.trajectory:
        rounds.add_row(str(t["round"]), str(t["candidates"]), str(t["correct"]), _ms(t["best_runtime_ms"]),
                       _x(t["best_speedup_eager"]), _x(t["best_speedup_compile"]), _idea(t["best_idea"]))
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(c.by_status.items()))
    cost = f"${c.cost:.4f}" + (f" (+{c.unpriced_calls} calls unpriced)" if c.unpriced_calls else "")
    facts = Text(f"candidates {c.candidates} ({statuses or 'none'}) · calls {c.calls} "
                 f"({c.failed_calls} failed, {c.malformed} malformed answers) · tokens "
                 f"{c.input_tokens:,} in / {c.output_tokens:,} out · {cost} · {run.wall_seconds:.0f} s")
    if run.gpu_idle_fraction is not None and run.gpu_idle_fraction == run.gpu_idle_fraction:  # NaN: not known
        facts.append(f" · device idle {100 * run.gpu_idle_fraction:.0f}%")
    parts = [head, rounds, facts, *devices_view(run.devices)]
    if c.failed_calls and c.last_error and not run.error:
        n = c.failed_calls
        parts.append(Text(f"{n} call{'s' if n > 1 else ''} failed; the last: {c.last_error}", style="yellow"))
    if run.error and show_error:
        parts.append(Text(f"error: {run.error}", style="bold red"))
    if run.best:
        r = run.best.result
        parts.append(Text.assemble(("best: ", "bold green"), f"{_ms(r.runtime_ms)}, {_x(r.speedup_eager)} eager, "
                                   f"{_x(r.speedup_compile)} torch.compile ({r.device}, {r.policy}; "
                                   f"{r.runtime.method if r.runtime else ''})"))
        if run.best_file:
            parts.append(Text(f"written to {run.best_file}"))
        if run.best.profile and "kernels" in run.best.profile:
            parts.append(counters_table(run.best.profile, "hardware counters of the best kernel (Nsight Compute)"))
        if r.device == "cpu":
            parts.append(Text("These are CPU timings (no GPU here; Triton kernels ran in its interpreter): they "
                              "show the kernels are correct, not how fast they are on a GPU.", style="yellow"))
    else:
        parts.append(Text("no correct kernel found", style="bold red"))
    return Group(*parts)


def bench_view(summary: dict) -> Group:
    table = Table(title=f"bench {summary['bench_id']} · {summary['suite']}", title_justify="left")
    for col in ("problem", "status", "correct", "× eager", "× compile", "candidates", "run"):
        table.add_column(col)
    for r in summary["rows"]:
        table.add_row(r["problem"], r["status"], "yes" if r["correct"] else "no", _x(r["speedup_eager"]),
                      _x(r["speedup_compile"]), str(r["candidates"]), r["run_id"])
    m = summary["metrics"]
    lines = [Text(f"{m['correct']}/{m['problems']} problems with a correct kernel")]
    for base in ("eager", "compile"):
        fp = "  ".join(f"fast_{p}={v:.2f}" for p, v in m[f"fast_p_{base}"].items())
        lines.append(Text(f"vs {base}: {fp}  geomean {_x(m[f'geomean_{base}'])}"))
    return Group(table, *lines, *devices_view(summary.get("devices") or []))


def devices_view(usage: list[dict]) -> list:
    """Where there were several devices (GPUs, a cluster's actors): each one's share of the work, and a warning
    where they were not all of one type (each speedup is against its own device's baselines)."""
    if len(usage) < 2:
        return []
    table = Table(title="devices", title_justify="left")
    for col in ("device", "name", "node", "judged", "busy", "utilisation", "lost"):
        table.add_column(col, justify="right" if col in ("judged", "busy", "utilisation") else "left")
    for d in usage:
        table.add_row(d["device"], d["name"] or "", d["node"] or "", str(d["judged"]), f"{d['busy_s']:.0f} s",
                      _pct(100 * d["utilisation"]) if d["utilisation"] is not None else "—", d["lost"] or "")
    parts = [table]
    if mixed := mixed_devices(sorted({d["name"] for d in usage if d["name"]})):
        parts.append(Text(mixed, style="yellow"))
    return parts




IDEA_CHARS = 240  # an idea in a table: whole, wrapped, up to this (ideas sharing their first 70 read as one)


def _idea(text: str | None) -> str:
    """An idea's text for a table cell: whole where it fits IDEA_CHARS, else cut at a word's end, said so."""
    text = " ".join((text or "").split())
    return text if len(text) <= IDEA_CHARS else text[:IDEA_CHARS].rsplit(" ", 1)[0] + " …"


def runs_view(rows: list[dict]) -> Table:
    table = Table(title="runs", title_justify="left")
    for col in ("id", "problem", "strategy", "proposer", "status", "candidates", "best × eager", "tokens", "cost"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["id"], r["problem"], r["strategy"], r["proposer"],
                      r["status"] + (f" ({r['stop_reason']})" if r["stop_reason"] else ""), str(r["candidates"]),
                      _x(r["speedup_eager"]), f"{r['tokens']:,}", f"${r['cost']:.4f}" if r["cost"] is not None else "-")
    return table


def candidates_view(rows: list[dict]) -> Table:
    """A run's candidates, one row each: key (what `runs show RUN --source KEY` takes), round, status, time,
    speedup over eager, and the idea it implements."""
    table = Table(title=f"candidates ({len(rows)})", title_justify="left")
    for col in ("key", "round", "status", "time", "× eager", "idea"):
        table.add_column(col, justify="right" if col in ("round", "time", "× eager") else "left")
    for c in rows:
        table.add_row(c["key"], str(c["round"]), c["status"] or "", _ms(c["runtime_ms"]), _x(c["speedup_eager"]),
                      _idea(c.get("idea")))
    return table


# `kernelcraft report` ------------------------------------------------------------------------------
def _pct(value) -> str:
    return "—" if value is None else (f"{value:.1f}%" if value >= 1 else f"{value:.2g}%")


def _cpu_note() -> Text:
    return Text("CPU timings: no GPU was used (Triton kernels ran in its interpreter); they show the kernels are "
                "correct, not how fast they are on a GPU.", style="yellow")


def problems_table(rows: list[dict], bench: bool = False) -> Table:
    """One row per problem (a bench adds each run's id)."""
    table = Table(title="per problem", title_justify="left")
    cols = ["problem", "eager", "compile", "best", "% of eager", "× compile", "of roofline", "correct/tried", "rounds"]
    longest = max((len(p["problem"]) for p in rows), default=7)
    for col in cols + (["run"] if bench else []):  # narrow terminals fold the run ids, never the problem names
        table.add_column(col, justify="left" if col in ("problem", "run") else "right",
                         no_wrap=col in ("problem", "eager", "compile", "best"), overflow="fold",
                         min_width=min(longest, 40) if col == "problem" else None)
    for p in rows:
        table.add_row(p["problem"], _ms(p["eager_ms"]), _ms(p["compile_ms"]), _ms(p["runtime_ms"]),
                      _pct(p["pct_of_eager"]), _x(p["speedup_compile"]),
                      _pct(100 * p["roofline_fraction"]) if p["roofline_fraction"] is not None else "—",
                      f"{p['correct_candidates']}/{p['candidates']}", str(p["rounds"]),
                      *([p["run_id"] or _SKIPPED.get(p["status"], "—")] if bench else []))
    return table


_SKIPPED = {"not_covered": "not covered", "too_large": "too large for the device"}


def trajectory_table(report: dict, title: str = "best kernel by round") -> Table | Text:
    """The rounds where the best kernel improved: time, % of eager, the idea and its category."""
    rows = report["improvements"]
    if not rows:
        return Text("no correct kernel: no trajectory", style="bold red")
    first, last = rows[0], rows[-1]
    table = Table(title=title, title_justify="left",
                  caption=f"{_ms(first['runtime_ms'])} → {_ms(last['runtime_ms'])} over {report['run']['rounds']} "
                          f"round{'' if report['run']['rounds'] == 1 else 's'}; % of eager = eager time / kernel time (eager {_ms(last['eager_ms'])})",
                  caption_justify="left")
    for col in ("round", "time", "% of eager", "× compile", "idea", "category"):
        table.add_column(col, justify="right" if col in ("round", "time", "% of eager", "× compile") else "left")
    for t in rows:
        table.add_row(str(t["round"]), _ms(t["runtime_ms"]), _pct(t["pct_of_eager"]), _x(t["speedup_compile"]),
                      t["idea"] or "—", t["category"] or "—")
    return table


def categories_table(cats: list[dict]) -> Table | Text:
    if not cats:
        return Text("no ideas on record (this strategy does not ask for tagged ideas)", style="dim")
    table = Table(title="ideas by category", title_justify="left",
                  caption="paid off: an implementation was correct and faster than its parent (or eager, from the "
                          "reference)", caption_justify="left")
    for col in ("category", "ideas", "implemented", "paid off", "candidates", "correct"):
        table.add_column(col, justify="left" if col == "category" else "right")
    for c in cats:
        table.add_row(c["category"], str(c["ideas"]), str(c["implemented"]), str(c["paid_off"]),
                      str(c["candidates"]), str(c["correct"]))
    return table


def report_view(report: dict) -> Group:
    run, c = report["run"], report["counts"]
    head = Text.assemble((f"run {run['run_id']}", "bold"), f"  {run['problem']} · {run['strategy']} · "
                         f"{run['proposer']} · {run['device']} · {run['status']}")
    facts = Text(f"candidates {c['candidates']} ({c['by_status'].get('ok', 0)} correct) · calls {c['calls']} · tokens "
                 f"{c['input_tokens']:,} in / {c['output_tokens']:,} out · ${c['cost']:.4f} · "
                 f"{run['wall_seconds']:.0f} s")
    parts = [head, problems_table(report["problems"]), trajectory_table(report), categories_table(report["categories"]),
             facts]
    best = report.get("best") or {}
    if best.get("profile") and "kernels" in best["profile"]:
        parts.append(counters_table(best["profile"], "hardware counters of the best kernel (Nsight Compute)"))
    if report["cpu_timings"]:
        parts.append(_cpu_note())
    if report.get("mixed_devices"):
        parts.append(Text(report["mixed_devices"], style="yellow"))
    return Group(*parts)


def _fast_p_lines(report: dict, label: str = "") -> list[Text]:
    m = report["metrics"]
    lines = [Text(f"{label}{m['correct']}/{m['problems']} problems with a correct kernel")]
    timed = any(p["compile_ms"] for p in report["problems"])
    if not timed:
        lines.append(Text(f"{label}torch.compile was not timed: no fast_p against it", style="dim"))
    for base in ("eager", "compile") if timed else ("eager",):
        fp = "  ".join(f"fast_{p}={v:.2f}" for p, v in m[f"fast_p_{base}"].items())
        lines.append(Text(f"{label}vs {base}: {fp}  geomean {_x(m[f'geomean_{base}'])}"))
    return lines


def bench_report_view(report: dict) -> Group:
    b = report["bench"]
    parts = [Text.assemble((f"bench {b['bench_id']}", "bold"), f"  {b['suite']} · {len(report['problems'])} problems"),
             problems_table(report["problems"], bench=True), *_fast_p_lines(report),
             categories_table(report["categories"])]
    if report["cpu_timings"]:
        parts.append(_cpu_note())
    if report.get("mixed_devices"):
        parts.append(Text(report["mixed_devices"], style="yellow"))
    return Group(*parts)


def compare_view(report: dict) -> Group:
    a, b = report["a"], report["b"]
    if report["kind"] == "compare_runs":
        table = Table(title=f"A {a['run']['run_id']}  vs  B {b['run']['run_id']}", title_justify="left")
        for col in ("", "A", "B"):
            table.add_column(col, justify="left" if not col else "right")
        fmt = {"best_ms": _ms, "speedup_eager": _x, "speedup_compile": _x,
               "cost": lambda v: f"${v:.4f}", "tokens": lambda v: f"{v:,}", "wall_seconds": lambda v: f"{v:.0f} s"}
        for r in report["rows"]:
            f = fmt.get(r["field"], str)
            table.add_row(r["label"], "—" if r["a"] is None else f(r["a"]), "—" if r["b"] is None else f(r["b"]))
        parts = [*(Text(f"note: {w}", style="yellow") for w in report.get("warnings") or []), table,
                 trajectory_table(a, "A: best kernel by round"), trajectory_table(b, "B: best kernel by round")]
    else:
        table = Table(title=f"A {a['bench']['bench_id']}  vs  B {b['bench']['bench_id']}", title_justify="left")
        for col in ("problem", "A best", "B best", "A × eager", "B × eager", "A × compile", "B × compile"):
            table.add_column(col, justify="left" if col == "problem" else "right")
        for r in report["rows"]:
            pa, pb = r["a"] or {}, r["b"] or {}
            table.add_row(r["problem"], _ms(pa.get("runtime_ms")), _ms(pb.get("runtime_ms")),
                          _x(pa.get("speedup_eager")), _x(pb.get("speedup_eager")),
                          _x(pa.get("speedup_compile")), _x(pb.get("speedup_compile")))
        parts = [table, *_fast_p_lines(a, "A "), *_fast_p_lines(b, "B ")]
    if a["cpu_timings"] or b["cpu_timings"]:
        parts.append(_cpu_note())
    return Group(*parts)
