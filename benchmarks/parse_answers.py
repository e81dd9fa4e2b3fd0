"""How well answers are read: each kernel file wrapped in the shapes model answers take, each parsed
with propose/parse.py, per shape how many came back right.

    python benchmarks/parse_answers.py [FILE_OR_DIR ...] [--compare main] [--json] [--out OUT.json]

Right means: the exact file recovered (the stated idea too where the answer states one); the same
program (equal syntax trees) where the answer split the file into blocks that must be joined; rejected
as cut off where the answer ends inside its final block. Ideas shapes wrap the built-in engineer's
moves for every level-1 problem it covers, and are right when exactly those ideas come back.
`--compare REV` reads the same answers with parse.py as it was at a git revision, beside the current one.
CPU only and deterministic: no model, no timing; the same files give the same counts.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from kernelcraft.problems import load_problem  # noqa: E402
from kernelcraft.propose.base import Idea  # noqa: E402
from kernelcraft.propose import parse as current_parse  # noqa: E402

DEFAULT_CORPUS = ["tests/fixtures", "src/kernelcraft/examples", "benchmarks/candidates"]
F = "```"
IDEA = Idea("Load four floats per thread with 16-byte vector loads.", "memory")


def block(body: str, lang: str = "python", fence: str = F, indent: str = "") -> str:
    lines = [indent + line if line else line for line in body.rstrip().split("\n")]
    return f"{indent}{fence}{lang}\n" + "\n".join(lines) + f"\n{indent}{fence}\n"


def cut(src: str, fraction: float = 0.6) -> str:
    """The file as an output limit leaves it: mid-line, past the kernel's start."""
    return src[:int(len(src) * fraction)]


def into_class(src: str, lines: int = 2) -> str:
    """The file down to `class ModelNew` and a few lines into it: a draft given up mid-class."""
    at = src.index("\nclass ModelNew") + 1
    return src[:at] + "\n".join(src[at:].split("\n")[:lines + 1])


def split_at_class(src: str) -> tuple[str, str]:
    at = src.index("\nclass ModelNew")
    return src[:at].rstrip() + "\n", src[at + 1:]


def split_head(src: str) -> tuple[str, str, str]:
    """(docstring and imports, the code between them and ModelNew, ModelNew onward)."""
    before, model = split_at_class(src)
    tree = ast.parse(before)
    end = 0
    for node in tree.body:
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and end == 0
        if not (docstring or isinstance(node, (ast.Import, ast.ImportFrom))):
            break
        end = node.end_lineno
    lines = before.split("\n")
    return "\n".join(lines[:end]) + "\n", "\n".join(lines[end:]).strip("\n") + "\n", model


def with_usage(src: str) -> str:
    """The file with a markdown usage example in a docstring of its own, as some models write them."""
    at = src.index("\nclass ModelNew")
    return src[:at] + '\n"""Usage:\n' + F + 'python\ny = ModelNew()(x)\n' + F + '\n"""\n' + src[at:]


# Kernel shapes: name -> (what it is, builder(src) -> answer text, what is right: "source", "program", "rejected",
# and for "program" the program expected, when it is not the file's own order).
KERNEL_SHAPES = {
    "plain": ("one ```python block between prose",
              lambda s: "Here is a faster kernel. It keeps each row in registers.\n\n" + block(s)
              + "\nThe launch uses one program per row.\n", "source"),
    "no_fences": ("the bare file, no fences", lambda s: s, "source"),
    "idea_header": ("Idea:/Category: lines, then the block",
                    lambda s: f"**Idea:** {IDEA.text}\n**Category:** memory\n\n" + block(s), "source"),
    "revisions": ("a complete draft, then a corrected final version",
                  lambda s: "First attempt:\n" + block("# draft: launch grid not checked\n" + s)
                  + "\nWait, that version has a bug in the launch grid. Corrected:\n\n" + block(s), "source"),
    "cut_off": ("one block, the answer ends inside it", lambda s: "Here is the kernel:\n\n" + F + "python\n" + cut(s),
                "rejected"),
    "cut_off_after_draft": ("(1) a complete draft, then the final block cut off",
                            lambda s: "Draft:\n" + block(s) + "\nNow the final, faster version:\n\n" + F + "python\n"
                            + cut(s), "rejected"),
    "abandoned_fence": ("(2) thinking with an unclosed draft fence, then the final block",
                        lambda s: "<think>\nThe reference is a row-wise op. Let me write it.\n" + F + "python\n"
                        + into_class(s) + "\n        hmm, wait, this indexing is wrong, let me redo it.\n"
                        "</think>\n\nHere is the kernel:\n\n" + block(s) + "\nDone.\n", "source"),
    "list_indented_3": ("(3) the block under a numbered item, indented 3 spaces",
                        lambda s: "1. The kernel keeps each row in registers.\n2. The full file:\n\n"
                        + block(s, indent="   ") + "\n3. Launch one program per row.\n", "source"),
    "list_indented_4": ("(3) the block under a bullet, indented 4 spaces",
                        lambda s: "- Full file:\n\n" + block(s, indent="    ") + "\n- That is all.\n", "source"),
    "prose_then_bare": ("(4) one line of prose, then the bare file",
                        lambda s: "Here is the optimized kernel:\n" + s, "source"),
    "tildes": ("(5) a ~~~python block", lambda s: "Here it is:\n\n" + block(s, fence="~~~") + "\n", "source"),
    "helper_blocks": ("(6) kernel and helpers in one block, ModelNew in the next",
                      lambda s: "First the kernel:\n\n" + block(split_at_class(s)[0]) + "\nThen the module:\n\n"
                      + block(split_at_class(s)[1]), "program"),
    "helper_blocks_imports_last": ("(6) the kernel without imports, then imports and ModelNew",
                                   lambda s: "The kernel:\n\n" + block(split_head(s)[1]) + "\nThe module that launches "
                                   "it:\n\n" + block(split_head(s)[0] + "\n\n" + split_head(s)[2]), "program"),
    "helper_after_model": ("the ModelNew block first, then the block it uses",
                           lambda s: "The module:\n\n" + block(split_at_class(s)[1]) + "\nAnd the kernel it calls:\n\n"
                           + block(split_at_class(s)[0]), "program",
                           lambda s: split_at_class(s)[1] + "\n\n" + split_at_class(s)[0]),
    "abandoned_fence_bare_final": ("(2) an unclosed ```python draft, then the final block opened by a bare ```",
                                   lambda s: "<think>\n" + F + "python\n" + cut(s, 0.4) + "\nhmm, wait, let me redo "
                                   "this.\n</think>\n\nHere is the kernel:\n\n" + block(s, lang=""), "source"),
    "fenced_draft_bare_final": ("a closed draft block in thinking, then the final file without fences",
                                lambda s: "<think>\n" + block("# draft\n" + s) + "That launch is wrong.\n</think>\n\n"
                                + s, "source"),
    # a limit, measured so that a change to it shows: a fence inside the file ends its block early
    "limit_fence_in_docstring": ("(limit) the file's docstring holds a ```python usage example",
                                 lambda s: "Here it is:\n\n" + block(with_usage(s)) + "\nDone.\n", "source",
                                 with_usage),
}


def ideas_text(ideas: list[Idea], trailing_comma=False, comments=False) -> str:
    rows = []
    for i, idea in enumerate(ideas):
        row = "  " + json.dumps({"idea": idea.text, "category": idea.category})
        last = i == len(ideas) - 1
        row += "," if not last or trailing_comma else ""
        rows.append(row + (f"  // {idea.category}" if comments else ""))
    return "[\n" + "\n".join(rows) + "\n]"


def reasoning(problem: str) -> str:
    return (f"1. First, the reference computes {problem} in PyTorch eager, one kernel per op.\n"
            "2. The bottleneck is memory bandwidth: every element is read once and written once.\n"
            "3. So the ideas should cut traffic and keep the loads wide.\n\n")


# Ideas shapes: name -> (what it is, builder(problem, ideas) -> answer text).
IDEAS_SHAPES = {
    "ideas_json": ("a ```json block, as asked",
                   lambda p, ideas: "Here are my ideas.\n\n" + block(ideas_text(ideas), "json")),
    "ideas_trailing_comma": ("(7) a ```json block with a trailing comma",
                             lambda p, ideas: block(ideas_text(ideas, trailing_comma=True), "json")),
    "ideas_comments": ("(7) // comments and a trailing comma",
                       lambda p, ideas: block(ideas_text(ideas, trailing_comma=True, comments=True), "json")),
    "ideas_reasoning_then_json": ("(8) numbered reasoning, then a ```json block",
                                  lambda p, ideas: reasoning(p) + block(ideas_text(ideas), "json")),
    "ideas_reasoning_then_bare_json": ("(8) numbered reasoning, then a bare JSON list with a trailing comma",
                                       lambda p, ideas: reasoning(p) + ideas_text(ideas, trailing_comma=True) + "\n"),
    "ideas_reasoning_then_list": ("(8) numbered reasoning, then the ideas as a tagged list",
                                  lambda p, ideas: reasoning(p) + "My ideas:\n" + "".join(
                                      f"{i + 1}. [{idea.category}] {idea.text}\n" for i, idea in enumerate(ideas))),
}


def kernel_files(paths: list[str]) -> list[Path]:
    """Python files that parse and define one ModelNew with a forward at the top level, in a stable order."""
    files = []
    for p in paths:
        path = (ROOT / p) if not Path(p).is_absolute() else Path(p)
        if not path.exists():
            raise SystemExit(f"parse_answers: no such file or directory: {p}")
        for f in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            try:
                tree = ast.parse(f.read_text())
            except SyntaxError:
                continue
            classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
            forward = classes and any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in classes[0].body)
            if len(classes) == 1 and forward and f.read_text().count("\nclass ModelNew") == 1:
                files.append(f)
    return list(dict.fromkeys(files))


def ideas_corpus() -> dict[str, list[Idea]]:
    """The built-in engineer's Triton moves for each level-1 problem it covers as one op."""
    from kernelcraft.propose.builtin.proposer import BuiltinProposer

    engineer, corpus = BuiltinProposer("cpu"), {}
    for f in sorted((ROOT / "src/kernelcraft/problems/level1").glob("*.py")):
        if f.stem.startswith("_"):
            continue
        analysis = engineer.coverage(load_problem(f"level1/{f.stem}"), "triton")
        if analysis.single is not None:
            corpus[f"level1/{f.stem}"] = [Idea(m.text, m.category) for m in engineer.moves(analysis.single, "triton")]
    engineer.close()
    return corpus


def judge_kernel(parse, answer: str, src: str, expect: str, idea: Idea | None) -> tuple[bool, str]:
    try:
        got = parse.parse_kernel(answer)
    except Exception as exc:  # noqa: BLE001 - an old parser may raise; that is a wrong answer here
        return False, f"raised {type(exc).__name__}"
    if expect == "rejected":
        return got.source is None, got.error or "accepted"
    if got.source is None:
        return False, got.error or "no source"
    if idea is not None and got.idea != idea:
        return False, f"idea {got.idea}"
    if expect == "source":
        return got.source == src, "exact" if got.source == src else "other source"
    try:
        same = ast.dump(ast.parse(got.source)) == ast.dump(ast.parse(src))
    except SyntaxError:
        return False, "syntax error"
    return same, "same program" if same else "other program"


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def load_parse_at(rev: str) -> types.ModuleType:
    """parse.py as it was at `rev`, as a module of its own (it imports only kernelcraft.propose.base)."""
    source = subprocess.run(["git", "show", f"{rev}:src/kernelcraft/propose/parse.py"], cwd=ROOT,
                            capture_output=True, text=True)
    if source.returncode:
        raise SystemExit(f"parse_answers: cannot read parse.py at {rev}: {source.stderr.strip()}")
    module = types.ModuleType("parse_at_" + "".join(c if c.isalnum() else "_" for c in rev))
    sys.modules[module.__name__] = module  # dataclasses look their module up there
    exec(compile(source.stdout, f"{rev}:parse.py", "exec"), module.__dict__)  # noqa: S102 - our own file at rev
    return module


def measure(files: list[Path], ideas: dict[str, list[Idea]], parsers: dict[str, types.ModuleType]) -> dict:
    shapes = {}
    for name, (what, build, expect, *order) in KERNEL_SHAPES.items():
        row = {"what": what, "right_means": {"source": "exact file", "program": "same syntax tree",
                                             "rejected": "rejected as cut off"}[expect],
               "answers": len(files)}
        for label, parse in parsers.items():
            wrong: dict[str, list[str]] = {}  # what came back instead -> the files
            for f in files:
                src = f.read_text()
                want = order[0](src) if order else src  # the file, or the program the answer should give
                ok, why = judge_kernel(parse, build(src), want, expect, IDEA if name == "idea_header" else None)
                if not ok:
                    wrong.setdefault(why, []).append(str(f.relative_to(ROOT)))
            row[label] = {"right": len(files) - sum(map(len, wrong.values())), "wrong": wrong}
        shapes[name] = row
    for name, (what, build) in IDEAS_SHAPES.items():
        row = {"what": what, "right_means": "exactly the ideas wrapped", "answers": len(ideas)}
        for label, parse in parsers.items():
            wrong = {}
            for problem, expected in ideas.items():
                got, error = parse.parse_ideas(build(problem, expected), len(expected))
                if [(i.text, i.category) for i in got] != [(i.text, i.category) for i in expected]:
                    wrong.setdefault(error or "other ideas than wrapped", []).append(problem)
            row[label] = {"right": len(ideas) - sum(map(len, wrong.values())), "wrong": wrong}
        shapes[name] = row
    return shapes


def table(shapes: dict, labels: list[str]) -> str:
    head = "| shape | answers | " + " | ".join(f"right ({label})" for label in labels) + " | right means |"
    lines = [head, "|" + "---|" * (3 + len(labels))]
    for name, row in shapes.items():
        cells = " | ".join(str(row[label]["right"]) for label in labels)
        lines.append(f"| {name} | {row['answers']} | {cells} | {row['right_means']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*", default=DEFAULT_CORPUS, help="kernel files or directories")
    ap.add_argument("--compare", metavar="REV", help="also read the answers with parse.py at this git revision")
    ap.add_argument("--json", action="store_true", help="print the JSON record instead of the table")
    ap.add_argument("--out", type=Path, help="write the JSON record here")
    args = ap.parse_args()
    files = kernel_files(args.paths)
    if not files:
        raise SystemExit("parse_answers: no kernel files (Python files defining one class ModelNew) found")
    parsers = {"now": current_parse}
    commit = None
    if args.compare:
        parsers[args.compare] = load_parse_at(args.compare)
        commit = git("rev-parse", args.compare)
    ideas = ideas_corpus()
    changed = " (parse code changed since)" if git("status", "--porcelain", "src/kernelcraft/propose") else ""
    record = {
        "what": "how propose/parse.py reads kernel files and ideas wrapped in the shapes model answers take",
        "date": datetime.date.today().isoformat(),
        "device": "cpu (counts, not timings: parsing text needs no accelerator)",
        "measurement": "CPU only, deterministic: parsing text, no model, no device, no timing",
        "corpus": {"paths": args.paths, "kernel_files": [str(f.relative_to(ROOT)) for f in files],
                   "ideas": "the built-in engineer's Triton moves per level-1 problem it covers as one op",
                   "ideas_answers": len(ideas), "ideas_per_answer": sum(map(len, ideas.values())) / max(1, len(ideas))},
        "parsers": {"now": f"the working tree at {git('rev-parse', 'HEAD')}" + changed,
                    **({args.compare: f"git {args.compare} ({commit})"} if commit else {})},
        "shapes": measure(files, ideas, parsers),
    }
    text = json.dumps(record, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text if args.json else table(record["shapes"], list(parsers)))


if __name__ == "__main__":
    main()
