"""Turning a proposer's answer text into ideas or a kernel source. Shared by every proposer, so a
stored answer parses the same on resume: everything here is a pure function of the text. Malformed
answers are named, never raised.

A kernel is read from the fenced blocks (fences.py): an answer that ends inside an open block was cut
off and gives nothing, even when an earlier draft was complete; of several versions of `ModelNew` the
last wins (a model revising itself), fenced or written out bare after the blocks; a `ModelNew` block
that uses names only another Python block defines (a kernel, a `load_inline` call) is joined with it
(names.py). An answer with no fences is taken from the first line that starts Python code. Ideas are
read from a JSON list (trailing commas and // comments forgiven), and only when there is none from
the answer's last markdown list."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field

from kernelcraft import syntax
from kernelcraft.propose.base import CATEGORIES, Idea
from kernelcraft.propose.fences import Block, Fences, inside, scan
from kernelcraft.propose.names import names

_MODELNEW = re.compile(r"^class\s+ModelNew\b", re.M)
# languages a helper block may be joined from (the Python-embedded kernel languages' tags among them)
_PYTHON = ("python", "py", "python3", "py3", "", "gluon", "helion", "cute", "cutedsl", "tilelang")
_JSON = ("json", "jsonc", "json5")
# Lines that start a Python file: those that must be code (an import, a def, a decorator, a docstring) and
# those that may be (a comment, an assignment; "# Title" and "Idea: a = b" are prose of the same look).
_SURE_CODE = r"""import\s+\w|from\s+[\w.]+\s+import\b|class\s+\w|(?:async\s+)?def\s+\w|@\w|[rRbBuU]?(?:"{3}|'{3})"""
_MAYBE_CODE = r"#|[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*(?::[^=\n]+)?=[^=]"
_CODE_START = re.compile(f"^(?:{_SURE_CODE}|{_MAYBE_CODE})")
_SURE_CODE_START = re.compile(f"^(?:{_SURE_CODE})")
_LIST_ITEM = re.compile(r"^(?P<indent>\s*)(?:(?P<number>\d+)[.)]|[-*•])\s+(?P<text>.+)$")
# A category named by tag or by its words ("memory access", "[memory]", "Category: precision").
_CATEGORY_WORDS = {
    "memory": ("memory", "coalesc", "vectoriz", "cache", "shared mem", "bandwidth"),
    "async": ("async", "latency", "pipelin", "prefetch", "overlap", "tma"),
    "precision": ("precision", "dtype", "data type", "tf32", "fp16", "bf16", "half", "fp8"),
    "compute": ("compute", "instruction", "tensor core", "fma", "wgmma", "mma", "intrinsic"),
    "parallelism": ("parallel", "occupancy", "block size", "grid", "warp", "cluster", "split"),
    "control": ("control flow", "loop", "unroll", "branch", "fusion", "fuse"),
}


@dataclass
class KernelAnswer:
    source: str | None  # the ModelNew file, or None when the answer has none
    # why no source: no_code_block, no_modelnew, two_modelnew, unterminated_code_block (the answer was cut off)
    error: str | None = None
    # how it was read: multiple_code_blocks, joined_code_blocks, abandoned_code_block, no_fences
    notes: list[str] = field(default_factory=list)
    idea: Idea | None = None  # the idea the answer says it realized (when asked to state one)


def category_of(label: str) -> str:
    """A category tag from free text: an exact tag or name first, then telling words."""
    low = label.strip().lower().strip("[]() *_`")
    for tag, name in CATEGORIES.items():
        if low in (tag, name):
            return tag
    for tag, words in _CATEGORY_WORDS.items():
        if any(w in low for w in words):
            return tag
    return "uncategorized"


# kernels ----------------------------------------------------------------------------------------------

def parse_kernel(text: str) -> KernelAnswer:
    lines = text.replace("\r\n", "\n").split("\n")
    fences = scan("\n".join(lines))
    first = fences.first_line()
    if first is None or not (fences.closed or fences.cut_off):  # no fences, or only a stray one at the end
        return _bare(lines[:first] if first is not None else lines)
    idea = _stated_idea(lines[:first])
    if fences.cut_off:
        return KernelAnswer(None, "unterminated_code_block", idea=idea)
    notes = ["abandoned_code_block"] if fences.abandoned else []
    closed = fences.closed
    with_model = [b for b in closed if _MODELNEW.search(b.body)]
    after = _bare_after(lines[closed[-1].last + 1:])
    if after is not None:  # the final version given without fences, after the blocks
        return KernelAnswer(after, None, (["multiple_code_blocks"] if with_model else []) + notes + ["no_fences"], idea)
    if not with_model:
        return KernelAnswer(None, "no_modelnew", notes, idea)
    final = with_model[-1]
    if len(with_model) > 1:
        notes.insert(0, "multiple_code_blocks")
    if len(_MODELNEW.findall(final.body)) > 1:
        return KernelAnswer(None, "two_modelnew", notes, idea)
    source = _joined([b for b in closed if b.lang in _PYTHON and b not in with_model], final)
    if source is None:
        source = final.body
    else:
        notes.append("joined_code_blocks")
    return KernelAnswer(source.rstrip() + "\n", None, notes, idea)


def _bare_after(lines: list[str]) -> str | None:
    """A file defining ModelNew once, without fences, in the lines after the last block, when it
    parses: a final version written out bare after drafts in blocks, or a final block opened by a
    bare fence after an unclosed draft (that fence read as the draft's closer, the closing one as a
    stray fence)."""
    model_at = [i for i, line in enumerate(lines) if _MODELNEW.match(line)]
    if len(model_at) != 1:
        return None
    start, end = _code_span(lines, model_at[0])
    return "\n".join(lines[start:end]).strip() + "\n" if _parses(lines[start:end]) else None


def _bare(lines: list[str]) -> KernelAnswer:
    """An answer without fences: the file itself, maybe after a line of prose and before a few more."""
    model_at = [i for i, line in enumerate(lines) if _MODELNEW.match(line)]
    if not model_at:
        return KernelAnswer(None, "no_code_block", idea=_stated_idea(lines))
    start, end = _code_span(lines, model_at[0])
    idea = _stated_idea(lines[:start])
    if len(model_at) > 1:
        return KernelAnswer(None, "two_modelnew", idea=idea)
    return KernelAnswer("\n".join(lines[start:end]).strip() + "\n", None, ["no_fences"], idea)


def _code_span(lines: list[str], model_at: int) -> tuple[int, int]:
    """From the first line that starts Python code and parses through to the end, dropping prose after
    the code if that is what keeps it from parsing. Lines that only may be code (a comment, an
    assignment) are tried up to the first that must be (an import, a def, a docstring). A file that
    parses from none of them (a kernel with a syntax error) is taken from that line to the end, so
    the verifier names its error where it is."""
    starts = []
    for i in range(model_at + 1):
        if _CODE_START.match(lines[i]):
            starts.append(i)
            if _SURE_CODE_START.match(lines[i]):
                break
    prose_after = [j for j in range(len(lines) - 1, model_at, -1)
                   if lines[j].strip() and not lines[j][0].isspace() and not _CODE_START.match(lines[j])]
    for start in starts:
        for end in [len(lines)] + prose_after[:8]:
            if _parses(lines[start:end]):
                return start, end
    return (0, len(lines)) if _parses(lines) else (starts[-1], len(lines))


def _parses(lines: list[str]) -> bool:
    try:
        syntax.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        return False
    return True


def _joined(blocks: list[Block], final: Block) -> str | None:
    """The ModelNew block with the other Python blocks that define names it uses but does not define:
    earlier ones before it, later ones after it (a class first, then "the kernel it calls"), each in
    its order; None when it needs none. The ModelNew block's head (its docstring and imports) goes
    first when an earlier block reads what it imports (a kernel block written without imports)."""
    model = names(final.body)
    if model is None or not model.free:
        return None
    need, provided = set(model.free), set()

    def takes(block: Block) -> bool:
        nonlocal need, provided
        found = names(block.body)
        if found is None or not found.defines & need:
            return False
        provided |= found.defines
        need = (need - found.defines) | (found.free - model.defines - provided)
        return True

    before = [b for b in reversed([b for b in blocks if b.first < final.first]) if takes(b)][::-1]
    after = [b for b in blocks if b.first > final.first and takes(b)]
    if not before and not after:
        return None
    model_lines = final.body.split("\n")
    head: list[str] = []
    if before and set().union(*(names(b.body).free for b in before)) & model.imports:
        end = 0  # the file's head: a docstring and the imports after it
        for node in model.tree.body:
            docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and end == 0
            if not (docstring or isinstance(node, (ast.Import, ast.ImportFrom))):
                break
            end = node.end_lineno
        head, model_lines = ["\n".join(model_lines[:end])], model_lines[end:]
    parts = head + [b.body for b in before] + ["\n".join(model_lines)] + [b.body for b in after]
    return "\n\n\n".join(part.strip("\n").rstrip() for part in parts if part.strip())


def _stated_idea(head_lines: list[str]) -> Idea | None:
    """`Idea: …` and `Category: …` lines before the code, when the prompt asked for them."""
    head = "\n".join(head_lines)
    m = re.search(r"^\W*idea\W*:[\s*_]*(.+)$", head, re.I | re.M)
    if not m:
        return None
    c = re.search(r"^\W*category\W*:[\s*_]*(.+)$", head, re.I | re.M)
    words = m.group(1).strip().strip("*_ ")
    return Idea(words, category_of(c.group(1)) if c else category_of(words))


# ideas ------------------------------------------------------------------------------------------------

def parse_ideas(text: str, count: int) -> tuple[list[Idea], str | None]:
    """Up to `count` ideas from a JSON list (preferred) or, when the answer has no JSON list at all, its
    last numbered/bulleted list. The error names what was wrong when no idea could be read."""
    text = text.replace("\r\n", "\n")
    fences = scan(text)
    ideas = _json_ideas(text, fences)
    if ideas == []:  # an explicit empty list: the proposer has no idea left, which is not a malformed answer
        return [], "exhausted"
    if ideas is None:
        ideas = [] if _json_tried(text, fences) else _listed_ideas(text, fences)
    seen, unique = set(), []
    for idea in ideas:
        key = idea.text.lower()
        if idea.text and key not in seen:
            seen.add(key)
            unique.append(idea)
    if not unique:
        return [], "no_ideas"
    return unique[:count], None


def _json_ideas(text: str, fences: Fences) -> list[Idea] | None:
    """The ideas of the last JSON list that holds ideas, else [] for an empty one; lists in a ```json
    block first."""
    offsets = [0]
    for line in text.split("\n"):
        offsets.append(offsets[-1] + len(line) + 1)
    spans = [(offsets[b.first], offsets[b.last]) for b in fences.closed if b.lang in _JSON]
    found = [(at, items) for at, items in _json_lists(text) if items == [] or _ideas_of(items)]
    in_json = [f for f in found if any(lo <= f[0] < hi for lo, hi in spans)]
    if not found:
        return None
    pool = in_json or found
    items = ([f for f in pool if f[1]] or pool)[-1][1]  # an empty list only when no list holds ideas
    return _ideas_of(items) if items else []


def _ideas_of(items: list) -> list[Idea] | None:
    if not all(isinstance(item, (dict, str)) for item in items):
        return None
    ideas = []
    for item in items:
        if isinstance(item, dict):
            words = str(item.get("idea") or item.get("text") or item.get("description") or "").strip()
            move = item.get("move")  # the built-in engineer's own name for it (Move.key)
            ideas.append(Idea(words, category_of(str(item.get("category", words))),
                              json.dumps(move, sort_keys=True) if isinstance(move, dict) else None))
        else:
            ideas.append(Idea(item.strip(), category_of(item)))
    return ideas if any(idea.text for idea in ideas) else None


def _json_tried(text: str, fences: Fences) -> bool:
    """A ```json block or a list of objects: the answer meant to give JSON, so a broken one is not
    read from its prose instead."""
    blocks = fences.closed + fences.abandoned + ([fences.open] if fences.open else [])
    return any(b.lang in _JSON for b in blocks) or re.search(r"\[\s*\{", text) is not None


def _json_lists(text: str, longest: int = 50_000) -> list[tuple[int, list]]:
    """Every JSON list in the text with its offset, outermost only. A `[` right after a name or a
    closing bracket is an index (`x[0]`), not a list."""
    out, at = [], 0
    while (start := text.find("[", at)) >= 0:
        at = start + 1
        if start and (text[start - 1].isalnum() or text[start - 1] in "_)]"):
            continue
        end = _closing(text, start, longest)
        if end is None:
            continue
        value = _relaxed_loads(text[start:end])
        if isinstance(value, list):
            out.append((start, value))
            at = end
    return out


def _closing(text: str, start: int, longest: int) -> int | None:
    """The offset just past the bracket that closes the one at `start`, skipping strings and //
    comments; None when brackets do not match, a string runs past its line, or it is too long."""
    stack, i, stop = [], start, min(len(text), start + longest)
    while i < stop:
        c = text[i]
        if c == '"':
            i += 1
            while i < stop and text[i] != '"':
                if text[i] == "\n":
                    return None
                i += 2 if text[i] == "\\" else 1
        elif text.startswith("//", i):
            i = text.find("\n", i)
            if i < 0:
                return None
            continue
        elif c in "[{":
            stack.append("]" if c == "[" else "}")
        elif c in "]}":
            if not stack or stack.pop() != c:
                return None
            if not stack:
                return i + 1
        i += 1
    return None


def _relaxed_loads(s: str):
    """json.loads, and failing that once more without // comments and trailing commas (outside
    strings); None when neither reads."""
    for attempt in (s, None):
        try:
            return json.loads(attempt if attempt is not None else _relaxed(s))
        except json.JSONDecodeError:
            continue
    return None


def _relaxed(s: str) -> str:
    out, i, n = [], 0, len(s)

    def skip(j: int) -> int:  # past whitespace and // comments
        while j < n:
            if s[j].isspace():
                j += 1
            elif s.startswith("//", j):
                nl = s.find("\n", j)
                j = n if nl < 0 else nl
            else:
                break
        return j

    while i < n:
        c = s[i]
        if c == '"':
            j = i + 1
            while j < n and s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            out.append(s[i:j + 1])
            i = j + 1
        elif s.startswith("//", i):
            i = skip(i)
        elif c == "," and skip(i + 1) < n and s[skip(i + 1)] in "]}":
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _listed_ideas(text: str, fences: Fences) -> list[Idea]:
    """The items of the answer's last list (numbered or bulleted), its outermost level only: a list
    ends at a line of prose or where its numbering starts again, so reasoning steps before the
    ideas are not ideas."""
    lines = text.split("\n")
    fenced = inside(fences, len(lines))
    groups: list[list[tuple[int, str]]] = []
    current, last_number = None, None
    for i, line in enumerate(lines):
        m = _LIST_ITEM.match(line)
        if fenced[i] or (not m and line.strip() and not line[0].isspace()):
            current = None  # prose or code ends a list
            continue
        if not m:
            continue  # a blank line or an item's continuation
        indent = len(m["indent"].expandtabs(4))
        number = int(m["number"]) if m["number"] else None
        if current is not None and number is not None and indent == current[0][0]:
            if last_number is not None and number <= last_number:
                current = None  # numbered from the start again: a new list
            last_number = number
        if current is None:
            current, last_number = [], number
            groups.append(current)
        current.append((indent, m["text"].strip()))
    if not groups:
        return []
    level = min(indent for indent, _ in groups[-1])
    ideas = []
    for indent, line in groups[-1]:
        if indent != level:
            continue
        tag = re.match(r"^\[([^\]]+)\]\s*(.+)$", line) or re.match(r"^\(([^)]+)\)\s*(.+)$", line)
        ideas.append(Idea(tag.group(2).strip(), category_of(tag.group(1))) if tag else Idea(line, category_of(line)))
    return ideas
