"""Rich renderables for the terminal. They are built here and printed by the CLI."""

from __future__ import annotations

from rich.console import Group
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from kernelcraft.verify.result import Result

_STYLE = {"ok": "bold green", "incorrect": "bold red", "rejected": "bold magenta",
          "compile_error": "bold yellow", "runtime_error": "bold red", "timeout": "bold yellow"}


def _ms(value) -> str:
    return "—" if value is None else (f"{value:.4f} ms" if value < 1 else f"{value:.3f} ms")


def _x(value) -> str:
    return "—" if value is None else f"{value:.2f}×"


def result_view(r: Result) -> Group:
    head = Text.assemble((r.status.upper(), _STYLE.get(r.status, "bold")),
                         f"  {r.candidate} ({r.backend}) on {r.problem}  [{r.device}, policy {r.policy}]")
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
        table.add_row("candidate", f"{_ms(r.runtime.median_ms)}  (IQR {_ms(r.runtime.iqr_ms)}, CV {r.runtime.cv:.2%}, "
                      f"n={r.runtime.samples}, {r.runtime.method})")
    if r.eager:
        table.add_row("PyTorch eager", f"{_ms(r.eager.median_ms)}" + ("  (cached)" if r.baseline_cached else ""))
    if r.compiled:
        table.add_row("torch.compile", _ms(r.compiled.median_ms))
    if r.runtime:
        table.add_row("speedup", f"{_x(r.speedup_eager)} vs eager, {_x(r.speedup_compile)} vs compile")
    if r.roofline_fraction is not None:
        table.add_row("roofline", f"{r.roofline_fraction:.1%} of the floor ({_ms(r.roofline_ms)})")
    for res in r.kernels_resources:
        table.add_row("kernel", f"{res.get('kernel')}: {res.get('registers', '?')} regs, "
                      f"{res.get('smem', 0)} B smem, {res.get('spill_stores', 0)} B spilled")
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
    table.add_row("FLOPs", f"{info['flops']:.4g}  (matmul/conv/attention: {info['matmul_flops']:.4g})")
    table.add_row("bytes (floor)", f"{info['bytes']:.4g}")
    table.add_row("intensity", f"{info['intensity']:.2f} FLOP/byte")
    for spec in info["inputs"]:
        table.add_row("input", f"{tuple(spec['shape'])} {spec['dtype']}")
    for spec in info["outputs"]:
        table.add_row("output", f"{tuple(spec['shape'])} {spec['dtype']}")
    return Group(Text(info["name"], style="bold cyan"), table, Syntax(info["source"], "python", line_numbers=False))
