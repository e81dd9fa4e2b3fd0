"""An apply's page in the HTML report: the model end to end (cards), its regions (share of the model's time,
PyTorch's time and the kernel's, what became of each), a plot of the two times per region, the notes, and each
region's run as the run page shows it (folded)."""

from __future__ import annotations

from kernelcraft.report import plots
from kernelcraft.report.html import _cards, _cpu_banner, _date, _figure, _run_sections, _status, _table, e, ms, pct, x
from kernelcraft.report.apply import EAGER_UNVERIFIED, GIVEN_BACK_COMPILED, REGION_FIGURES, region_fate


def apply_page(r: dict) -> str:
    a = r["apply"]
    return "\n".join([_header(a), _cpu_banner(r), _summary(a), "<h2>Regions</h2>", _regions(a),
                      '<h2>Plots</h2><div class="plots">',
                      _figure(plots.region_times(a), "Each region's time under PyTorch (the verifier's, where its run "
                              "measured it; else the profile's) and its kernel's; regions put in the model are "
                              "marked ✓.", "No region had a kernel."),
                      "</div>", _notes(a), f"<h2>Region runs ({len(r['runs'])})</h2>", *map(_run, r["runs"])])


def _header(a: dict) -> str:
    captured = f" · captured with {e(a['method'])}" if a.get("method") else ""
    return (f'<header class="page"><h1>apply {e(a["apply_id"])} · {e(a["model"])}</h1><div class="meta">'
            f'{_status(a["status"])}{captured} · {e(a.get("device", "?"))} · started {e(_date(a["created"]))}'
            "</div></header>")


def _summary(a: dict) -> str:
    e2e = a.get("end_to_end")
    replaced = [g for g in a.get("regions", []) if g["status"] == "replaced"]
    if e2e is None and a.get("final_regions"):
        verdict = ("model with its kernels, eager", EAGER_UNVERIFIED, GIVEN_BACK_COMPILED)
    elif e2e is None:
        verdict = ("model", "as it was", "no region was replaced" if a["status"] == "done" else a["status"])
    else:
        verdict = ("model end to end", "correct" if e2e["correct"] else e2e["status"],
                   f"{ms(e2e.get('runtime_ms'))} against {ms(e2e.get('eager_ms'))} eager")
    bound = a.get("amdahl_bound")
    cards = [verdict, ("× eager", x(a.get("speedup_eager")), "the reassembled model"),
             ("× torch.compile", x(a.get("speedup_compile")), "the reassembled model"),
             ("replaced", pct(100 * a.get("replaced_share", 0)), f"of the model's time, {len(replaced)} regions"),
             ("predicted", x(a.get("expected_speedup")) if replaced else "—", "from the regions' own speedups"),
             ("Amdahl allows", x(bound) if bound and bound < 100 else "over 100×" if bound else "—",
              "were the optimized regions free")]
    times = a.get("times") or {}
    if times.get("final"):
        shown = [f"{name} {ms(times.get(key))}" for name, key in
                 (("eager", "eager_ms"), ("torch.compile", "compile_ms"),
                  ("torch.compile, CUDA graphs", "compile_graphs_ms"), ("with kernels", "kernels_ms"),
                  ("compiled with kernels", "compiled_kernels_ms")) if times.get(key)]
        cards.append(("given back", f"{times['final']}, {ms(times.get('final_ms'))}", "; ".join(shown)))
    lines = [_cards(cards)]
    compiled = a.get("compiled") or {}
    if compiled.get("model_file"):
        lines.append(f'<p>Compiled with its kernels ({e(", ".join(compiled["regions"]))}): <span class="mono">'
                     f'{e(compiled["model_file"])}</span> (<span class="mono">kernelcraft.apply(model, DIR, '
                     'use="compiled")</span>).</p>')
    if a.get("model_file"):
        lines.append(f'<p>The model with its kernels: <span class="mono">{e(a["model_file"])}</span> '
                     "(<span class=\"mono\">kernelcraft.apply(model, DIR)</span> swaps them into a live model).</p>")
    if a.get("error"):
        lines.append(f'<p class="note">{e(a["error"])}</p>')
    return "\n".join(lines)


def _regions(a: dict) -> str:
    rows = [[e(g["name"]), e(g["kind"]), e(pct(100 * g["share"])), e(ms(g["ms"])), e(ms(g.get("eager_ms"))),
             e(ms(g["kernel_ms"])), e(x(g["speedup_eager"])), e(x(g.get("speedup_compile"))),
             *map(e, region_fate(g, a)),
             f'<a href="#run-{e(g["run_id"])}" class="mono">{e(g["run_id"])}</a>' if g["run_id"] else ""]
            for g in a.get("regions", [])]
    return _table(["region", "kind", "share", "in profile", "PyTorch", "kernel", "× eager", "× compile", "status",
                   "why", "run"], rows, {2, 3, 4, 5, 6, 7},
                  REGION_FIGURES)


def _notes(a: dict) -> str:
    notes = a.get("notes") or []
    return ("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>") if notes else ""


def _run(run: dict) -> str:
    p = run["problems"][0]
    return (f'<details class="run" id="run-{e(p["run_id"])}"><summary><strong>{e(p["problem"])}</strong> '
            f'{_status(p["status"])} · best {e(ms(p["runtime_ms"]))} · {e(x(p["speedup_eager"]))} eager</summary>'
            f'<div class="body">{_run_sections(run)}</div></details>')
