"""Fenced code blocks in an answer's markdown, read line by line as CommonMark reads them, with two
liberties that model answers need: an opening fence met inside an open block starts a new block and
abandons the open one (a model that drops a draft mid-block and starts again rarely closes it), and
a fence may be indented by any amount (a block under a nested list item).

An opening fence is three or more backticks or tildes, then an optional info string whose first word
is the language. A closing fence uses the same character, at least as many, with no info string. The
body loses the opening fence's indentation (as far as all its lines have it)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FENCE_LINE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>.*?)[ \t]*$")


@dataclass
class Block:
    lang: str  # the info string's first word, lower case ("" when none)
    body: str  # the lines between the fences, the fence's indentation taken off, "\n"-joined
    first: int  # line number (0-based) of the opening fence
    last: int  # line number of the closing fence; the last line of the text for an open block
    info: str = ""  # the whole info string


@dataclass
class Fences:
    closed: list[Block] = field(default_factory=list)  # in order of appearance
    abandoned: list[Block] = field(default_factory=list)  # opened, then a new opening fence came first
    open: Block | None = None  # the block still open where the text ends

    @property
    def cut_off(self) -> bool:
        """The text ends inside a block: the output limit hit mid-answer. A bare fence with nothing
        after it is a stray fence, not a cut."""
        return self.open is not None and bool(self.open.info or self.open.body.strip())

    def first_line(self) -> int | None:
        """Where the first fence opens, or None when the text has none."""
        starts = [b.first for b in self.closed + self.abandoned + ([self.open] if self.open else [])]
        return min(starts) if starts else None


def _opening(line: str) -> re.Match | None:
    m = _FENCE_LINE.match(line)
    if m and m["fence"][0] == "`" and "`" in m["info"]:  # ```x``` on one line is inline code, no fence
        return None
    return m


def _dedent(lines: list[str], indent: str) -> str:
    """The fence's indentation taken off every line, as far as all the lines that hold code have it
    (a model that indents the fences but not the code keeps its code whole)."""
    for line in lines:
        if line.strip():
            while not line.startswith(indent):
                indent = indent[:-1]
    return "\n".join(line[len(indent):] if line.startswith(indent) else line.lstrip(" \t") for line in lines)


def scan(text: str) -> Fences:
    fences = Fences()
    lines = text.split("\n")
    opened: re.Match | None = None
    start, body = 0, []

    def block(last: int) -> Block:
        info = opened["info"]
        return Block(info.split()[0].lower() if info else "", _dedent(body, opened["indent"]), start, last, info)

    for i, line in enumerate(lines):
        m = _opening(line)
        if opened is None:
            if m:
                opened, start, body = m, i, []
            continue
        if m and m["fence"][0] == opened["fence"][0] and len(m["fence"]) >= len(opened["fence"]) and not m["info"]:
            fences.closed.append(block(i))
            opened = None
        elif m and m["info"]:
            fences.abandoned.append(block(i - 1))
            opened, start, body = m, i, []
        else:
            body.append(line)
    if opened is not None:
        fences.open = block(len(lines) - 1)
    return fences


def inside(fences: Fences, n_lines: int) -> list[bool]:
    """Per line: whether it belongs to a fenced block (its fences included)."""
    mask = [False] * n_lines
    for b in fences.closed + fences.abandoned + ([fences.open] if fences.open else []):
        for i in range(b.first, min(b.last, n_lines - 1) + 1):
            mask[i] = True
    return mask

