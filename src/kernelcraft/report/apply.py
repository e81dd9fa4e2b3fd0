"""An apply in the terminal: per region (its share of the model's time, PyTorch's time and its kernel's, what
became of it), then the model end to end: correct, its speedup over eager and torch.compile, the share of its
time replaced, the model compiled with its kernels, the model's eager, torch.compile and final times by one
method, what the regions' own speedups predict and what Amdahl allows. Read from the outcome's dict, so
an apply stored in the run store renders as the one just run."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from kernelcraft.report.terminal import _ms, _x


# what the region table's figures are, in the terminal and the HTML page alike
REGION_FIGURES = ("share and in profile: the model's profile; PyTorch and kernel: the region's run, each timed alone "
                  "by the verifier (another method: the two need not agree)")

IN_FINAL = "in the model given back"
EAGER_UNVERIFIED = "not verified (the notes say why)"
GIVEN_BACK_COMPILED = "the model given back is compiled with its kernels"


def region_fate(region: dict, summary: dict) -> tuple[str, str]:
    """What became of a region, as its row shows it (status, why). A region's status is the eager form's; where the
    model given back is the compiled one, a kernel in it says so, with the eager form's status beside."""
    status, reason = region["status"], region.get("reason") or ""
    if region["name"] in (summary.get("final_regions") or []) and status != "replaced":
        compiled = summary.get("compiled") or {}
        form = "compiled with its kernels" + (", CUDA graphs" if compiled.get("cuda_graphs") else "")
        eager = status + (f": {reason}" if reason else "")
        return IN_FINAL, f"{form} (the eager form: {eager})"
    return status, reason


def apply_view(summary: dict) -> Group:
    title = f"apply {summary['apply_id']} · {summary['model']}"
    if summary.get("method"):
        title += f" · captured with {summary['method']} · {summary['device']}"
    table = Table(title=title, title_justify="left")
    # two measurements, each named: the profile's (a region's share and its time in the model's profile, which add
    # up) and its run's (PyTorch and the kernel timed alone by the verifier, whose ratio is the speedup)
    table.caption = REGION_FIGURES
    table.caption_justify = "left"
    numbers = ("share", "in profile", "PyTorch", "kernel", "× eager", "× compile")
    for col in ("region", "kind", *numbers, "what became of it", "run"):
        table.add_column(col, justify="right" if col in numbers else "left")
    for r in summary["regions"]:
        status, reason = region_fate(r, summary)
        what = status + (f": {reason}" if reason else "")
        table.add_row(r["name"], r["kind"], f"{r['share']:.1%}", _ms(r["ms"]), _ms(r.get("eager_ms")),
                      _ms(r["kernel_ms"]), _x(r["speedup_eager"]), _x(r.get("speedup_compile")), what[:90],
                      r["run_id"] or "")
    lines = []
    profile = summary.get("profile")
    if profile:
        ops = ", ".join(f"{op} {_ms(ms)}" for op, ms in profile.get("top_ops") or [])
        lines.append(Text(f"model: {_ms(profile['model_ms'])} ({profile['method']}); the regions alone sum to "
                          f"{profile['covered']:.0%} of it" + (f"; torch.profiler's heaviest ops: {ops}" if ops else "")))
    e = summary.get("end_to_end")
    replaced = [r["name"] for r in summary["regions"] if r["status"] == "replaced"]
    if e is None and summary.get("final_regions"):
        lines.append(Text(f"the model with its kernels, eager: {EAGER_UNVERIFIED}; {GIVEN_BACK_COMPILED}"))
    elif e is None:
        lines.append(Text("no region was replaced: the model stays as it is (1.00× eager)"
                          if summary["status"] == "done" else f"stopped before the end: {summary['status']}"))
    elif e["correct"]:
        lines.append(Text(f"end to end: correct, {_x(summary['speedup_eager'])} eager, "
                          f"{_x(summary['speedup_compile'])} torch.compile ({_ms(e['runtime_ms'])} against "
                          f"{_ms(e['eager_ms'])}); {len(replaced)} regions replaced, "
                          f"{summary['replaced_share']:.0%} of the model's time", style="bold"))
    else:
        lines.append(Text(f"end to end: {e['status']}: {e['message'][:200]}; the model stays as it is",
                          style="red"))
    compiled = summary.get("compiled")
    if compiled:
        c = compiled.get("end_to_end")
        state = ("not verified: the budget was spent" if c is None else
                 f"correct, {_ms(c['runtime_ms'])}" if c["correct"] else f"{c['status']}: {c['message'][:160]}")
        graphs = ", CUDA graphs" if compiled.get("cuda_graphs") else ""
        lines.append(Text(f"compiled with its kernels{graphs} ({', '.join(compiled['regions'])}: the kernels that "
                          f"beat torch.compile of their region): {state}"))
    times = summary.get("times")
    if times:
        kernels = f"with kernels {_ms(times['kernels_ms'])}, " if times.get("kernels_ms") else ""
        if times.get("compiled_kernels_ms"):
            kernels += f"compiled with kernels {_ms(times['compiled_kernels_ms'])}, "
        graphs = f" (CUDA graphs {_ms(times['compile_graphs_ms'])})" if times.get("compile_graphs_ms") else ""
        lines.append(Text(f"the model: eager {_ms(times['eager_ms'])}, torch.compile {_ms(times.get('compile_ms'))}"
                          f"{graphs}, {kernels}given back {_ms(times['final_ms'])} ({times['final']}; {times.get('method')})"))
    bounds = []
    if summary.get("expected_speedup") and replaced:
        bounds.append(f"the replaced regions' own speedups predict {_x(summary['expected_speedup'])}")
    bound = summary.get("amdahl_bound")
    if bound:
        bounds.append("Amdahl allows at most " + (_x(bound) if bound < 100 else "over 100×")
                      + " for the regions optimized")
    if bounds:
        lines.append(Text("; ".join(bounds)))
    if summary.get("model_file"):
        lines.append(Text(f"the model with its kernels: {summary['model_file']} (kernelcraft.apply(model, DIR) "
                          "swaps them into a live model)"))
    if compiled and compiled.get("model_file"):
        lines.append(Text(f"compiled with its kernels: {compiled['model_file']} (kernelcraft.apply(model, DIR, "
                          "use=\"compiled\"))"))
    for note in summary.get("notes", []):
        lines.append(Text(f"note: {note}", style="yellow"))
    if summary.get("error"):
        lines.append(Text(f"error: {summary['error']}", style="red"))
    return Group(table, *lines)


def profile_view(data: dict) -> Group:
    """The profile an apply takes before optimizing: each region's standalone time and share, the largest first,
    and the ATen ops torch.profiler saw take the most time."""
    table = Table(title=f"profile: {_ms(data['model_ms'])} a call", title_justify="left",
                  caption=f"timed {data['method']}; alone: each region's forward by itself", caption_justify="left")
    for col in ("region", "kind", "alone", "share"):
        table.add_column(col, justify="right" if col in ("alone", "share") else "left")
    for name, kind, ms, share in sorted(data["regions"], key=lambda r: -r[3]):
        table.add_row(name, kind, _ms(ms), f"{share:.1%}")
    ops = ", ".join(f"{op} {_ms(ms)}" for op, ms in data.get("top_ops") or [])
    return Group(table, Text(f"torch.profiler's heaviest ops: {ops}")) if ops else Group(table)


def applies_view(rows: list[dict]) -> Table:
    table = Table(title="applies", title_justify="left")
    for col in ("id", "model", "status", "× eager", "replaced"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["apply_id"], r["model"], r["status"], _x(r["speedup_eager"]), ", ".join(r["replaced"]))
    return table
