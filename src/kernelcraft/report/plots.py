"""The report's plots, drawn with matplotlib and returned as inline SVG strings (no display, no files).

Each function takes report dicts (report/data.py) as `series`: a list of (label, report), one entry for
a single run or bench, two for a side-by-side comparison. A function returns None when there is
nothing to draw; the page then says why.
"""

from __future__ import annotations

import io
import re

import matplotlib

matplotlib.use("Agg")  # never a display, whatever the environment says

from matplotlib.figure import Figure  # noqa: E402 - after the backend is chosen
from matplotlib.ticker import FuncFormatter, PercentFormatter  # noqa: E402

COLORS = ("#2563eb", "#ea580c")  # one per series
MUTED = "#94a3b8"
STYLE = {"svg.fonttype": "none", "font.family": "DejaVu Sans", "font.size": 10, "axes.spines.top": False,
         "axes.spines.right": False, "axes.edgecolor": "#64748b", "axes.grid": True, "grid.color": "#e2e8f0",
         "grid.linewidth": 0.8, "axes.axisbelow": True, "axes.titlesize": 11, "axes.titleweight": "bold",
         "axes.titlelocation": "left", "legend.frameon": False, "xtick.color": "#334155", "ytick.color": "#334155"}


def _svg(fig: Figure, name: str) -> str:
    """The figure as an <svg> element sized by the page (width and height left to CSS)."""
    buf = io.StringIO()
    with matplotlib.rc_context({**STYLE, "svg.hashsalt": name}):
        fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    head, rest = text.split(">", 1)
    head = re.sub(r'\s(width|height)="[^"]*"', "", head)
    return f'{head} role="img" aria-label="{name}" class="plot">{rest}'


def _figure(width: float = 6.2, height: float = 3.4) -> Figure:
    with matplotlib.rc_context(STYLE):
        return Figure(figsize=(width, height))


def _legend(ax) -> None:
    """Below the axes, so the plot keeps its width."""
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, labels, fontsize=8.5, loc="upper center", bbox_to_anchor=(0.5, -0.2),
              ncol=min(3, len(labels)), handlelength=1.6, columnspacing=1.2)


def _times(v: float, _pos=None) -> str:
    return f"{v:g}×"


def speedup_by_round(series: list[tuple[str, dict]]) -> str | None:
    """Every correct candidate's speedup over eager by round (dots), the best so far (a step line), and
    candidates that were not correct (crosses along the bottom)."""
    runs = [(label, r) for label, r in series if r.get("trajectory")]
    if not runs:
        return None
    with matplotlib.rc_context(STYLE):
        fig = _figure()
        ax = fig.add_subplot()
        shift = 0.12 if len(runs) > 1 else 0.0
        values = []
        for i, (label, r) in enumerate(runs):
            color, dx = COLORS[i % 2], (i - (len(runs) - 1) / 2) * 2 * shift
            ok = [c for c in r["rounds"] if c["speedup_eager"]]
            bad = [c for c in r["rounds"] if not c["speedup_eager"]]
            values += [c["speedup_eager"] for c in ok]
            ax.scatter([c["round"] + dx for c in ok], [c["speedup_eager"] for c in ok], s=22, color=color,
                       alpha=0.45, linewidths=0, label=f"{label}: correct candidates")
            if bad:
                ax.scatter([c["round"] + dx for c in bad], [0.03] * len(bad), s=18, marker="x", color=color,
                           alpha=0.5, transform=ax.get_xaxis_transform(), label=f"{label}: not correct")
            steps = [(t["round"] + dx, t["best_speedup_eager"]) for t in r["trajectory"] if t["best_speedup_eager"]]
            if steps:
                ax.step([s[0] for s in steps], [s[1] for s in steps], where="post", color=color, linewidth=2,
                        label=f"{label}: best so far")
                ax.plot([s[0] for s in steps], [s[1] for s in steps], "o", color=color, markersize=4)
        if values:
            ax.set_yscale("log")
            lo, hi = min(values + [1.0]), max(values + [1.0])
            ax.set_ylim(lo / 1.8, hi * 1.8)
            ax.axhline(1.0, color="#475569", linestyle="--", linewidth=1)
            ax.annotate("PyTorch eager", (1.0, 1.0), xycoords=("axes fraction", "data"), xytext=(-4, 4),
                        textcoords="offset points", ha="right", fontsize=8, color="#475569")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}×"))
        else:
            ax.set_yticks([])
            ax.text(0.5, 0.5, "no correct candidate", transform=ax.transAxes, ha="center", color=MUTED)
        rounds = sorted({c["round"] for _, r in runs for c in r["rounds"]})
        ax.set_xticks(rounds)
        ax.set_xlabel("round")
        ax.set_ylabel("speedup over PyTorch eager")
        ax.set_title("Speedup per round")
        _legend(ax)
        return _svg(fig, "speedup per round")


def categories_chart(series: list[tuple[str, dict]]) -> str | None:
    """Ideas proposed per category, and how many of them paid off (report/data.py defines it)."""
    cats = sorted({c["category"] for _, r in series for c in r["categories"]})
    if not cats:
        return None
    with matplotlib.rc_context(STYLE):
        fig = _figure(height=max(2.2, 0.5 * len(cats) * len(series) + 1.2))
        ax = fig.add_subplot()
        n = len(series)
        h = 0.8 / n
        for i, (label, r) in enumerate(series):
            rows = {c["category"]: c for c in r["categories"]}
            ys = [k + (i - (n - 1) / 2) * h for k in range(len(cats))]
            ideas = [rows.get(c, {}).get("ideas", 0) for c in cats]
            paid = [rows.get(c, {}).get("paid_off", 0) for c in cats]
            prefix = f"{label}: " if n > 1 else ""
            ax.barh(ys, ideas, height=h * 0.9, color=COLORS[i % 2], alpha=0.28, label=f"{prefix}ideas")
            ax.barh(ys, paid, height=h * 0.9, color=COLORS[i % 2], label=f"{prefix}paid off")
            for y, total, good in zip(ys, ideas, paid):
                ax.annotate(f"{good}/{total}", (total, y), xytext=(4, 0), textcoords="offset points",
                            va="center", fontsize=8, color="#334155")
        ax.set_yticks(range(len(cats)), cats)
        ax.invert_yaxis()
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_xlim(0, max(c["ideas"] for _, r in series for c in r["categories"]) * 1.18 + 0.5)
        ax.set_xlabel("ideas")
        ax.set_title("Ideas by category, and how many paid off")
        ax.grid(axis="y", visible=False)
        _legend(ax)
        return _svg(fig, "ideas by category")


def fast_p_chart(series: list[tuple[str, dict]]) -> str | None:
    """fast_p (the share of problems with a correct kernel more than p times faster) against p."""
    benches = [(label, r) for label, r in series if r.get("fast_p_curve")]
    if not benches:
        return None
    with matplotlib.rc_context(STYLE):
        fig = _figure()
        ax = fig.add_subplot()
        for i, (label, r) in enumerate(benches):
            curve = r["fast_p_curve"]
            prefix = f"{label}: " if len(benches) > 1 else ""
            ax.step(curve["p"], curve["eager"], where="post", color=COLORS[i % 2], linewidth=2,
                    label=f"{prefix}vs PyTorch eager")
            if any(p["compile_ms"] for p in r["problems"]):  # else torch.compile was not timed
                ax.step(curve["p"], curve["compile"], where="post", color=COLORS[i % 2], linewidth=1.5,
                        linestyle="--", label=f"{prefix}vs torch.compile")
        ax.axvline(1.0, color="#475569", linewidth=1, linestyle=":")
        ax.set_ylim(-0.03, 1.05)
        ax.set_xlim(left=0)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.xaxis.set_major_formatter(FuncFormatter(_times))
        ax.set_xlabel("p (speedup threshold)")
        ax.set_ylabel("fast_p")
        ax.set_title("fast_p over p")
        _legend(ax)
        return _svg(fig, "fast_p over p")


def roofline_chart(series: list[tuple[str, dict]]) -> str | None:
    """Each best kernel's time beside its roofline floor (the least time the device allows), with the
    fraction of the floor it reached. None when no result has a floor (CPU runs, unknown GPUs)."""
    bars = [(label, p) for label, r in series for p in r["problems"] if p.get("roofline_ms") and p.get("runtime_ms")]
    if not bars:
        return None
    with matplotlib.rc_context(STYLE):
        fig = _figure(height=max(2.2, 0.42 * len(bars) + 1.2))
        ax = fig.add_subplot()
        names = [f"{p['problem']} ({label})" if len(series) > 1 else p["problem"] for label, p in bars]
        ys = range(len(bars))
        labels = {label: i for i, (label, _) in enumerate(series)}
        ax.barh(ys, [p["runtime_ms"] for _, p in bars], height=0.6,
                color=[COLORS[labels[label] % 2] for label, _ in bars], label="best kernel")
        ax.scatter([p["roofline_ms"] for _, p in bars], ys, marker="|", s=260, color="#0f172a", linewidths=2.5,
                   zorder=3, label="roofline floor")
        for y, (_, p) in zip(ys, bars):
            ax.annotate(f"{p['runtime_ms']:.4g} ms · {100 * p['roofline_ms'] / p['runtime_ms']:.0f}% of the floor",
                        (p["runtime_ms"], y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
        ax.set_xscale("log")
        top = max(p["runtime_ms"] for _, p in bars)
        ax.set_xlim(min(p["roofline_ms"] for _, p in bars) / 2, top * 12)
        ax.set_yticks(list(ys), names)
        ax.invert_yaxis()
        ax.grid(axis="y", visible=False)
        ax.set_xlabel("milliseconds (log)")
        ax.set_title("Best kernels against their roofline floor")
        _legend(ax)
        return _svg(fig, "roofline")


def region_times(apply: dict) -> str | None:
    """An apply's regions that had a kernel: PyTorch's time and the kernel's, side by side (horizontal bars, the
    largest share at the top); ✓ marks the regions put in the model."""
    regions = [g for g in apply.get("regions", []) if g.get("kernel_ms")]
    if not regions:
        return None
    regions.sort(key=lambda g: g["share"])
    fig = _figure(6.2, 0.9 + 0.42 * len(regions))
    ax = fig.add_subplot()
    rows = range(len(regions))
    ax.barh([i + 0.2 for i in rows], [g.get("eager_ms") or g["ms"] for g in regions], height=0.38, color=MUTED,
            label="PyTorch")
    ax.barh([i - 0.2 for i in rows], [g["kernel_ms"] for g in regions], height=0.38, color=COLORS[0], label="kernel")
    ax.set_yticks(list(rows), [("✓ " if g["status"] == "replaced" else "") + g["name"] for g in regions], fontsize=8.5)
    ax.set_xlabel("ms")
    ax.grid(axis="y", visible=False)
    _legend(ax)
    return _svg(fig, "region times")
