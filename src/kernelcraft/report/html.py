"""The HTML report's pages for a run, a bench, or two runs or benches side by side, and the helpers the apply page
(apply_html.py) shares; page.py puts a page in its frame (inline CSS, plots as inline SVG, no scripts, nothing
fetched). Everything taken from the store is escaped here; the kernel source goes through Pygments, which escapes
it too."""

from __future__ import annotations

import time
from html import escape

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from kernelcraft.metrics import P_VALUES
from kernelcraft.report import plots

CPU_NOTE = ("These are CPU timings: no GPU was used (Triton kernels ran in its interpreter). They show that the "
            "kernels are correct, not how fast they would be on a GPU.")
NO_ROOFLINE = ("No roofline floor: the results carry none (CPU runs, or a GPU whose peak figures kernelcraft "
               "does not know).")


# formatting ------------------------------------------------------------------------------------------


def e(value) -> str:
    return escape("" if value is None else str(value))


def ms(v) -> str:
    return "—" if v is None else (f"{v:.4f} ms" if v < 1 else f"{v:.3f} ms")


def x(v) -> str:
    return "—" if v is None else (f"{v:.2f}×" if v >= 0.1 else f"{v:.2g}×")


def pct(v) -> str:
    return "—" if v is None else (f"{v:.1f}%" if v >= 1 else f"{v:.2g}%")


def usd(v) -> str:
    return "—" if v is None else f"${v:.4f}"


def _date(t) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "—"


def _rounds(n: int) -> str:
    return f"{n} round" + ("" if n == 1 else "s")


def _ident(r: dict) -> str:
    return r["run"]["run_id"] if r["kind"] == "run" else r["bench"]["bench_id"]


def _status(s: str | None) -> str:
    return f'<span class="st st-{e(s)}">{e(s)}</span>' if s else ""


def _tag(cat: str | None) -> str:
    return f'<span class="tag">{e(cat)}</span>' if cat else ""


def _table(head: list[str], rows: list[list[str]], numeric: set[int] = frozenset(), caption: str = "") -> str:
    """A table; cells are HTML already (escaped by the caller)."""
    th = "".join(f'<th class="n">{h}</th>' if i in numeric else f"<th>{h}</th>" for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    cap = f"<caption>{caption}</caption>" if caption else ""
    return f"<div class=\"scroll\"><table>{cap}<thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>"


def _cards(items: list[tuple[str, str, str]]) -> str:
    return '<div class="cards">' + "".join(
        f'<div class="card"><div class="k">{e(k)}</div><div class="v">{e(v)}</div><div class="s">{e(s)}</div></div>'
        for k, v, s in items) + "</div>"


def _figure(svg: str | None, caption: str, missing: str | None) -> str:
    if svg is None:
        return f'<p class="note">{e(missing)}</p>' if missing else ""
    return f"<figure>{svg}<figcaption>{e(caption)}</figcaption></figure>"


def _source(text: str) -> str:
    return '<div class="source">' + highlight(text, PythonLexer(), HtmlFormatter(noclasses=True, style="friendly")) \
        + "</div>"


def _cpu_banner(report: dict) -> str:
    """The CPU-timings banner, and the mixed-devices one (a cluster of more than one device type)."""
    banners = [f'<div class="banner"><strong>CPU timings.</strong> {e(CPU_NOTE)}</div>' if report["cpu_timings"] else ""]
    if report.get("mixed_devices"):
        banners.append(f'<div class="banner"><strong>Several device types.</strong> {e(report["mixed_devices"])}</div>')
    return "".join(banners)


# a run -----------------------------------------------------------------------------------------------
def _run_header(r: dict) -> str:
    run = r["run"]
    stop = f" ({run['stop_reason']})" if run["stop_reason"] else ""
    bench = f" · bench {run['bench_id']}" if run["bench_id"] else ""
    return (f'<header class="page"><h1>{e(run["problem"])} · run {e(run["run_id"])}</h1>'
            f'<div class="meta">{e(run["strategy"])} · {e(run["proposer"])} · {e(run["device"])} · '
            f'{e(run["status"] + stop)} · started {e(_date(run["created"]))}{e(bench)}</div></header>')


def _run_cards(r: dict) -> str:
    p, c, run = r["problems"][0], r["counts"], r["run"]
    return _cards([
        ("best kernel", ms(p["runtime_ms"]), f"eager {ms(p['eager_ms'])}"),
        ("% of eager", pct(p["pct_of_eager"]), f"{x(p['speedup_eager'])} PyTorch eager"),
        ("vs torch.compile", x(p["speedup_compile"]), f"compile {ms(p['compile_ms'])}"),
        ("candidates", f"{c['by_status'].get('ok', 0)}/{c['candidates']}", "correct / tried"),
        ("rounds", str(run["rounds"]), f"{run['wall_seconds']:.0f} s wall"),
        ("tokens", f"{c['input_tokens'] + c['output_tokens']:,}", f"{c['calls']} calls · {usd(c['cost'])}"),
    ])


def _problem_table(rows: list[dict], bench: bool = False) -> str:
    """One row per problem; in a bench each links to its run's section and shows the run's status."""
    body = []
    for p in rows:
        name = f'<a href="#run-{e(p["run_id"])}">{e(p["problem"])}</a>' if bench and p["run_id"] else e(p["problem"])
        if p.get("reason"):  # not covered: why, on hover
            name = f'<span title="{e(p["reason"])}">{name}</span>'

        body.append([name] + ([_status(p["status"])] if bench else []) + [
            "yes" if p["correct"] else "no", ms(p["eager_ms"]), ms(p["compile_ms"]), ms(p["runtime_ms"]),
            pct(p["pct_of_eager"]), x(p["speedup_eager"]), x(p["speedup_compile"]), ms(p["roofline_ms"]),
            pct(100 * p["roofline_fraction"] if p["roofline_fraction"] is not None else None),
            f"{p['correct_candidates']}/{p['candidates']}", str(p["rounds"])])
    head = ["problem"] + (["run"] if bench else []) + [
        "correct", "eager", "compile", "best", "% of eager", "× eager", "× compile", "roofline floor", "of floor",
        "correct / tried", "rounds"]
    first = 3 if bench else 2
    return _table(head, body, numeric=set(range(first, len(head))))


def _trajectory_table(r: dict) -> str:
    rows = [[str(t["round"]), ms(t["runtime_ms"]), pct(t["pct_of_eager"]), x(t["speedup_compile"]), e(t["idea"] or "—"),
             _tag(t["category"]), f'<span class="mono">{e(t["key"])}</span>'] for t in r["improvements"]]
    if not rows:
        return '<p class="note">No correct kernel was found, so there is no trajectory.</p>'
    first, last = r["improvements"][0], r["improvements"][-1]
    cap = (f"Each row is a round where the best kernel improved: {ms(first['runtime_ms'])} → {ms(last['runtime_ms'])} "
           f"over {_rounds(r['run']['rounds'])}. % of eager = PyTorch eager's time / the kernel's time (both from the "
           f"kernel's own result; eager took {ms(last['eager_ms'])}).")
    return _table(["round", "time", "% of eager", "× compile", "idea", "category", "candidate"], rows,
                  numeric={0, 1, 2, 3}, caption=e(cap))


def _rounds_table(r: dict) -> str:
    rows = [[str(t["round"]), str(t["candidates"]), str(t["correct"]), ms(t["best_runtime_ms"]),
             x(t["best_speedup_eager"]), x(t["best_speedup_compile"])] for t in r["trajectory"]]
    return _table(["round", "tried", "correct", "best so far", "× eager", "× compile"], rows,
                  numeric={0, 1, 2, 3, 4, 5})


def _category_table(cats: list[dict], definition: str) -> str:
    if not cats:
        return '<p class="note">No ideas on record: this strategy does not ask for tagged ideas.</p>'
    rows = [[_tag(c["category"]), str(c["ideas"]), str(c["implemented"]), str(c["paid_off"]),
             pct(100 * c["paid_off"] / c["ideas"]), str(c["candidates"]), str(c["correct"])] for c in cats]
    return _table(["category", "ideas", "implemented", "paid off", "paid-off rate", "candidates", "correct"], rows,
                  numeric={1, 2, 3, 4, 5, 6}, caption=e(definition))


def _counters(profile: dict) -> str:
    """A stored profile (verify/profile): its top kernels as a table, its summary in words below."""
    rows = []
    for k in profile["kernels"][:3]:
        gbps = f" ({k['dram_gbps']:.0f} GB/s)" if k.get("dram_gbps") is not None else ""
        ratio = k.get("conflict_ratio")
        rows.append([f'<span class="mono">{e(k["short"][:70])}</span>' + (" (yours)" if k.get("custom") else ""),
                     e(f"{pct(100 * k['share'])} · {ms(k['time_us'] / 1e3)}"), e(pct(k.get("dram_pct")) + gbps),
                     e(pct(k.get("sm_pct"))),
                     e(f"{pct(k.get('achieved_occupancy_pct'))} / {pct(k.get('theoretical_occupancy_pct'))}"),
                     e(pct(k.get("l2_hit_pct"))), e("—" if ratio is None else pct(100 * ratio)), e(k.get("verdict"))])
    head, _, rest = profile["summary"].partition("\n")
    return (_table(["kernel", "time", "DRAM of peak", "SM of peak", "occupancy (achieved / theoretical)", "L2 hit",
                    "bank conflicts", "verdict"], rows, numeric={1, 2, 3, 4, 5, 6}, caption=e(head))
            + f'<pre class="wrap">{e(rest)}</pre>')


def _candidate(c: dict) -> str:
    speed = f" · {ms(c['runtime_ms'])} · {x(c['speedup_eager'])} eager" if c["correct"] else ""
    paid = ' · <span class="better">paid off</span>' if c["paid_off"] else ""
    idea = f" · {e(c['idea'][:110])}" if c["idea"] else ""
    kv = [("status", _status(c["status"])), ("round", e(c["round"])), ("origin / backend", e(f"{c['origin']} / {c['backend']}")),
          ("idea", e(c["idea"] or "—") + " " + _tag(c["category"])), ("parent", e(c["parent"] or "— (the reference)"))]
    if c["parse_error"]:
        kv.append(("parse error", e(c["parse_error"])))
    if c["reasons"]:
        kv.append(("reasons", e(", ".join(c["reasons"]))))
    if c["max_rel_error"] is not None:
        kv.append(("max rel. error", e(f"{c['max_rel_error']:.3g}")))
    if c["runtime_ms"] is not None:
        spread = f" (IQR {ms(c['iqr_ms'])}, CV {c['cv']:.1%}, n={c['samples']}, {c['timing']})" if c["cv"] is not None else ""
        kv.append(("time", e(ms(c["runtime_ms"]) + spread)))
    kv += [("PyTorch eager", e(ms(c["eager_ms"]))), ("torch.compile", e(ms(c["compile_ms"]))),
           ("speedup", e(f"{x(c['speedup_eager'])} eager, {x(c['speedup_compile'])} compile, "
                         f"{pct(c['pct_of_eager'])} of eager"))]
    if c["roofline_ms"] is not None:
        kv.append(("roofline", e(f"floor {ms(c['roofline_ms'])}, {pct(100 * (c['roofline_fraction'] or 0))} of it")))
    if c["compile_seconds"] is not None:
        kv.append(("compile", e(f"{c['compile_seconds']:.3f} s")))
    if c["correct"]:
        against = "its parent" if c["payoff_baseline"] == "parent" else "PyTorch eager"
        kv.append(("paid off", e(f"{'yes' if c['paid_off'] else 'no'} (against {against})")))
    if c["duplicate"]:
        kv.append(("duplicate", "the same source as an earlier candidate: its verdict is reused"))
    body = "<dl class=\"kv\">" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in kv) + "</dl>"
    for title, text, cls in (("message", c["message"], ' class="wrap"'), ("compile log", c["compile_log"], "")):
        if text:
            body += f"<h4>{title}</h4><pre{cls}>{e(text)}</pre>"
    profile = c.get("profile")
    if profile:
        body += "<h4>hardware counters</h4>" + (_counters(profile) if "kernels" in profile else
                                               f'<p class="note">not profiled: {e(profile.get("error"))}</p>')
    for note in c["notes"]:
        body += f'<p class="note">{e(note)}</p>'
    if c["source"]:
        body += f"<details><summary>source</summary><pre>{e(c['source'])}</pre></details>"
    return (f'<details class="cand" id="cand-{e(c["id"])}"><summary><span class="mono">{e(c["key"])}</span> '
            f"{_status(c['status'])}{speed}{paid}{idea}</summary><div class=\"body\">{body}</div></details>")


def _run_sections(r: dict, label: str = "") -> str:
    """Everything about one run below its header (also used inside bench and comparison pages)."""
    series = [(label or "run", r)]
    best = r["best"]
    parts = [_run_cards(r), "<h2>Problem</h2>", _problem_table(r["problems"]),
             "<h2>Best kernel by round</h2>", _trajectory_table(r),
             "<h3>Every round</h3>", _rounds_table(r),
             '<h2>Plots</h2><div class="plots">',
             _figure(plots.speedup_by_round(series), "Dots: correct candidates; line: the best kernel so far; "
                     "crosses along the bottom: candidates that were not correct.", "No candidates."),
             _figure(plots.categories_chart(series), r["payoff_definition"], None),
             _figure(plots.roofline_chart(series), "The bar is the best kernel's time; the tick is the roofline "
                     "floor, the least time the device allows for the problem's FLOPs and bytes.", NO_ROOFLINE),
             "</div>",
             "<h2>Ideas by category</h2>", _category_table(r["categories"], r["payoff_definition"])]
    if best:
        idea = f" · idea: {best['idea']} ({best['category']})" if best["idea"] else ""
        parts += [f"<h2>The best kernel <span class=\"mono\">{e(best['key'])}</span></h2>",
                  f"<p>{e(ms(best['runtime_ms']))} · {e(x(best['speedup_eager']))} PyTorch eager · "
                  f"{e(x(best['speedup_compile']))} torch.compile · {e(best['backend'])} · round {e(best['round'])}"
                  f"{e(idea)}</p>", _source(best["source"])]
        if best.get("profile") and "kernels" in best["profile"]:
            parts += ["<h3>Hardware counters (Nsight Compute, one call)</h3>", _counters(best["profile"])]
    else:
        parts.append('<h2>The best kernel</h2><p class="note">No correct kernel was found.</p>')
    parts += [f"<h2>Candidates ({len(r['candidates'])})</h2>"] + [_candidate(c) for c in r["candidates"]]
    return "\n".join(parts)


def _run_page(r: dict) -> str:
    return "\n".join([_run_header(r), _cpu_banner(r), _run_sections(r)])


# a bench ---------------------------------------------------------------------------------------------
def _fast_p_table(reports: list[tuple[str, dict]]) -> str:
    head = ["", "correct"] + [f"fast_{p:g}" for p in P_VALUES] + ["geomean"]
    rows = []
    for label, r in reports:
        m = r["metrics"]
        for base in ("eager", "compile") if compile_timed(r) else ("eager",):
            rows.append([e(f"{label} vs {'PyTorch eager' if base == 'eager' else 'torch.compile'}".strip()),
                         f"{m['correct']}/{m['problems']}"]
                        + [pct(100 * v) for v in m[f"fast_p_{base}"].values()] + [x(m[f"geomean_{base}"])])
    untimed = [label or "this bench" for label, r in reports if not compile_timed(r)]
    note = (f" torch.compile was not timed in {' and '.join(untimed)} (--no-compile-baseline), so there is no fast_p "
            "against it." if untimed else "")
    return _table(head, rows, numeric=set(range(1, len(head))),
                  caption="fast_p: the share of problems whose kernel is correct and more than p times faster than "
                          "the baseline. geomean: the geometric mean speedup over the problems with a correct kernel." + note)


def compile_timed(r: dict) -> bool:
    """Whether torch.compile was timed for any of the bench's problems."""
    return any(p["compile_ms"] for p in r["problems"])


def _bench_header(r: dict) -> str:
    b = r["bench"]
    cfg = b["config"]
    return (f'<header class="page"><h1>bench {e(b["bench_id"])} · {e(b["suite"])}</h1><div class="meta">'
            f'{len(r["problems"])} problems · {e(cfg.get("strategy", "?"))} · {e(cfg.get("backend", "?"))} · '
            f'started {e(_date(b["created"]))}</div></header>')


def _bench_body(r: dict, label: str = "") -> str:
    m, c = r["metrics"], r["counts"]
    runs = []
    for run in r["runs"]:
        p = run["problems"][0]
        runs.append(f'<details class="run" id="run-{e(p["run_id"])}"><summary><strong>{e(p["problem"])}</strong> '
                    f'{_status(p["status"])} · best {e(ms(p["runtime_ms"]))} · {e(x(p["speedup_eager"]))} eager · '
                    f'run <span class="mono">{e(p["run_id"])}</span></summary><div class="body">'
                    f"{_run_sections(run, label)}</div></details>")
    return "\n".join([
        _cards([("problems", str(m["problems"]), f"{m['correct']} with a correct kernel"),
                ("fast_1 vs eager", pct(100 * m["fast_p_eager"]["1"]), "correct and faster than eager"),
                ("fast_1 vs compile", pct(100 * m["fast_p_compile"]["1"]), "correct and faster than compile"),
                ("geomean × eager", x(m["geomean_eager"]), "over correct kernels"),
                ("candidates", f"{c['candidates']:,}", f"{c['calls']} calls · {usd(c['cost'])}")]),
        "<h2>Per problem</h2>", _problem_table(r["problems"], bench=True),
        "<h2>fast_p</h2>", _fast_p_table([(label, r)]),
        '<h2>Plots</h2><div class="plots">',
        _figure(plots.fast_p_chart([(label or "bench", r)]), "fast_p against the threshold p: solid vs PyTorch eager, "
                "dashed vs torch.compile; the dotted line is p = 1.", "No problems."),
        _figure(plots.roofline_chart([(label or "bench", r)]), "Each problem's best kernel (bar) against its roofline "
                "floor (tick).", NO_ROOFLINE),
        _figure(plots.categories_chart([(label or "bench", r)]), r["payoff_definition"], None),
        "</div>", "<h2>Ideas by category</h2>", _category_table(r["categories"], r["payoff_definition"]),
        f"<h2>Runs ({len(r['runs'])})</h2>", *runs])


def _bench_page(r: dict) -> str:
    return "\n".join([_bench_header(r), _cpu_banner(r), _bench_body(r)])


# side by side ----------------------------------------------------------------------------------------
FORMATS = {"best_ms": ms, "speedup_eager": x, "speedup_compile": x, "tokens": lambda v: f"{v:,}", "cost": usd,
           "wall_seconds": lambda v: f"{v:.0f} s"}  # the other fields: str


def _compare_page(report: dict) -> str:
    a, b = report["a"], report["b"]
    banner = _cpu_banner({"cpu_timings": a["cpu_timings"] or b["cpu_timings"]})
    series = [("A", a), ("B", b)]
    head = (f'<header class="page"><h1>Side by side: <span class="a">A</span> {e(_ident(a))} · '
            f'<span class="b">B</span> {e(_ident(b))}</h1><div class="meta">two '
            f'{"runs" if a["kind"] == "run" else "benches"} from one store</div></header>')
    if report["kind"] == "compare_runs":
        rows = [[e(r["label"]), _cell(r["field"], r["a"], r["b"]), _cell(r["field"], r["b"], r["a"])]
                for r in report["rows"]]
        table = _table(["", '<span class="a">A</span>', '<span class="b">B</span>'], rows,
                       caption="Green: the better of the two (faster kernel, higher speedup).")
        traj = "".join(f'<h3><span class="{k.lower()}">{k}</span> best kernel by round</h3>{_trajectory_table(r)}'
                       for k, r in series)
        plots_html = [_figure(plots.speedup_by_round(series), "A in blue, B in orange: dots are correct candidates, "
                              "lines the best so far.", "No candidates."),
                      _figure(plots.categories_chart(series), a["payoff_definition"], None),
                      _figure(plots.roofline_chart(series), "Best kernels against their roofline floor.", NO_ROOFLINE)]
        details = [f'<h2><span class="{k.lower()}">{k}</span> · run {e(_ident(r))}</h2>'
                   f"{_run_sections(r, k)}" for k, r in series]
        warned = "".join(f'<p class="note">{e(w)}</p>' for w in report.get("warnings") or [])
        return "\n".join([head, banner, warned, "<h2>Comparison</h2>", table, traj, '<h2>Plots</h2><div class="plots">',
                          *plots_html, "</div>", *details])
    rows = []
    for row in report["rows"]:
        pa, pb = row["a"] or {}, row["b"] or {}
        rows.append([e(row["problem"]), _cell("best_ms", pa.get("runtime_ms"), pb.get("runtime_ms")),
                     _cell("best_ms", pb.get("runtime_ms"), pa.get("runtime_ms")),
                     _cell("speedup_eager", pa.get("speedup_eager"), pb.get("speedup_eager")),
                     _cell("speedup_eager", pb.get("speedup_eager"), pa.get("speedup_eager")),
                     _cell("speedup_compile", pa.get("speedup_compile"), pb.get("speedup_compile")),
                     _cell("speedup_compile", pb.get("speedup_compile"), pa.get("speedup_compile")),
                     e(pa.get("candidates", "—")), e(pb.get("candidates", "—"))])
    table = _table(["problem", "A best", "B best", "A × eager", "B × eager", "A × compile", "B × compile",
                    "A candidates", "B candidates"], rows, numeric=set(range(1, 9)),
                   caption="Green: the better of the two. — : no correct kernel, or the problem is not in that bench.")
    details = [f'<h2><span class="{k.lower()}">{k}</span> · bench {e(_ident(r))}</h2>{_bench_body(r, k)}'
               for k, r in series]
    return "\n".join([head, banner, "<h2>Per problem</h2>", table, "<h2>fast_p</h2>", _fast_p_table(series),
                      '<h2>Plots</h2><div class="plots">',
                      _figure(plots.fast_p_chart(series), "A in blue, B in orange; solid vs eager, dashed vs compile.",
                              "No problems."),
                      _figure(plots.categories_chart(series), a["payoff_definition"], None),
                      "</div>", *details])


def _cell(field: str, mine, other) -> str:
    fmt = FORMATS.get(field, str)
    text = "—" if mine is None else fmt(mine)
    if mine is None or other is None or field not in ("best_ms", "speedup_eager", "speedup_compile") or mine == other:
        return e(text)
    better = mine < other if field == "best_ms" else mine > other
    return f'<span class="better">{e(text)}</span>' if better else e(text)
