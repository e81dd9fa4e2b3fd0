"""Turning a proposer's answer text into ideas or a kernel source. Shared by every proposer, so a
stored answer parses the same on resume. Malformed answers are named, never raised."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from kernelcraft.propose.base import CATEGORIES, Idea

_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.S | re.M)
_MODELNEW = re.compile(r"^class\s+ModelNew\b", re.M)
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
    error: str | None = None  # why no source: no_code_block, no_modelnew, two_modelnew, unterminated_code_block
    notes: list[str] = field(default_factory=list)  # e.g. multiple_code_blocks
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


def parse_kernel(text: str) -> KernelAnswer:
    text = text.replace("\r\n", "\n")
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    with_model = [body for _, body in blocks if _MODELNEW.search(body)]
    idea = _stated_idea(text)
    if not blocks:
        if text.count("```") % 2 == 1:
            return KernelAnswer(None, "unterminated_code_block", idea=idea)
        if "```" not in text and _MODELNEW.search(text):  # a bare file with no fences: accept it as is
            if len(_MODELNEW.findall(text)) > 1:
                return KernelAnswer(None, "two_modelnew", idea=idea)
            return KernelAnswer(text.strip() + "\n", None, ["no_fences"], idea)
        return KernelAnswer(None, "no_code_block", idea=idea)
    if not with_model:
        if text.count("```") % 2 == 1:
            return KernelAnswer(None, "unterminated_code_block", idea=idea)
        return KernelAnswer(None, "no_modelnew", idea=idea)
    source = with_model[-1]  # a model that revises itself ends with its final version
    notes = ["multiple_code_blocks"] if len(with_model) > 1 else []
    if len(_MODELNEW.findall(source)) > 1:
        return KernelAnswer(None, "two_modelnew", notes, idea)
    return KernelAnswer(source.rstrip() + "\n", None, notes, idea)


def _stated_idea(text: str) -> Idea | None:
    """`Idea: …` and `Category: …` lines before the code, when the prompt asked for them."""
    head = text.split("```", 1)[0]
    m = re.search(r"^\W*idea\W*:[\s*_]*(.+)$", head, re.I | re.M)
    if not m:
        return None
    c = re.search(r"^\W*category\W*:[\s*_]*(.+)$", head, re.I | re.M)
    words = m.group(1).strip().strip("*_ ")
    return Idea(words, category_of(c.group(1)) if c else category_of(words))


def parse_ideas(text: str, count: int) -> tuple[list[Idea], str | None]:
    """Up to `count` ideas from a JSON list (preferred) or a numbered/bulleted list. The error names
    what was wrong when no idea could be read (the ideas that were read are kept either way)."""
    text = text.replace("\r\n", "\n")
    ideas = _json_ideas(text)
    if ideas == []:  # an explicit empty list: the proposer has no idea left, which is not a malformed answer
        return [], "exhausted"
    if ideas is None:
        ideas = _listed_ideas(text)
    seen, unique = set(), []
    for idea in ideas:
        key = idea.text.lower()
        if idea.text and key not in seen:
            seen.add(key)
            unique.append(idea)
    if not unique:
        return [], "no_ideas"
    return unique[:count], None


def _json_ideas(text: str) -> list[Idea] | None:
    for lang, body in _FENCE.findall(text) or [("", text)]:
        start, end = body.find("["), body.rfind("]")
        if start < 0 or end <= start:
            continue
        try:
            items = json.loads(body[start:end + 1])
        except json.JSONDecodeError:
            continue
        if items == []:
            return []
        ideas = []
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                words = str(item.get("idea") or item.get("text") or item.get("description") or "").strip()
                ideas.append(Idea(words, category_of(str(item.get("category", words)))))
            elif isinstance(item, str):
                ideas.append(Idea(item.strip(), category_of(item)))
        if ideas:
            return ideas
    return None


def _listed_ideas(text: str) -> list[Idea]:
    ideas = []
    for m in re.finditer(r"^\s*(?:\d+[.)]|[-*•])\s+(.+)$", text, re.M):
        line = m.group(1).strip()
        tag = re.match(r"^\[([^\]]+)\]\s*(.+)$", line) or re.match(r"^\(([^)]+)\)\s*(.+)$", line)
        if tag:
            ideas.append(Idea(tag.group(2).strip(), category_of(tag.group(1))))
        else:
            ideas.append(Idea(line, category_of(line)))
    return ideas
