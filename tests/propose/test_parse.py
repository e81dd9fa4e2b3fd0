"""propose/parse.py: kernels and ideas read out of a proposer's answer text (pure text, no model)."""

from __future__ import annotations

import json

import pytest

from kernelcraft.propose.base import CATEGORIES, Idea
from kernelcraft.propose.parse import KernelAnswer, category_of, parse_ideas, parse_kernel

FENCE = "```"
KERNEL = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.relu()\n"
HELPER = "def helper(x):\n    return x + 1\n"


def block(body: str, lang: str = "python") -> str:
    return f"{FENCE}{lang}\n{body.rstrip()}\n{FENCE}\n"


# parse_kernel -----------------------------------------------------------------------------------------

def test_one_good_block_gives_the_source_without_the_fences():
    answer = parse_kernel("Here is a faster kernel.\n\n" + block(KERNEL) + "\nIt fuses the ops.\n")
    assert isinstance(answer, KernelAnswer)
    assert answer.error is None
    assert answer.source == KERNEL  # whole file, ending in exactly one newline, no ``` left
    assert answer.notes == []
    assert answer.idea is None


def test_language_tag_and_trailing_whitespace_do_not_matter():
    answer = parse_kernel(block(KERNEL + "\n\n\n", lang="py") )
    assert answer.error is None and answer.source == KERNEL
    answer = parse_kernel(block(KERNEL, lang=""))
    assert answer.error is None and answer.source == KERNEL


def test_prose_only_is_no_code_block():
    answer = parse_kernel("I would tile the matrix in shared memory and use tensor cores.")
    assert answer.source is None
    assert answer.error == "no_code_block"


def test_code_block_without_modelnew():
    answer = parse_kernel("Try this:\n" + block(HELPER))
    assert answer.source is None
    assert answer.error == "no_modelnew"


def test_modelnew_must_be_a_class_definition_at_line_start():
    # a mention of the name, or a class whose name only starts with ModelNew, is not a definition
    text = block("# subclass of ModelNew would be nice\nclass ModelNewer:\n    pass\nx = ModelNew\n")
    assert parse_kernel(text).error == "no_modelnew"


def test_two_modelnew_classes_in_one_block():
    answer = parse_kernel(block(KERNEL + "\n\n" + KERNEL.replace("relu", "sigmoid")))
    assert answer.source is None
    assert answer.error == "two_modelnew"


def test_two_blocks_with_modelnew_take_the_last():
    first = KERNEL.replace("relu()", "clamp_min(0)")
    answer = parse_kernel("First try:\n" + block(first) + "\nOn reflection, better:\n" + block(KERNEL))
    assert answer.error is None
    assert answer.source == KERNEL
    assert answer.notes == ["multiple_code_blocks"]


def test_a_helper_block_next_to_the_modelnew_block_is_no_multiple_note():
    answer = parse_kernel(block(KERNEL) + "\nUsage:\n" + block(HELPER))
    assert answer.error is None and answer.source == KERNEL
    assert answer.notes == []


def test_unterminated_fence_is_a_cut_off_answer():
    cut = "Here it is:\n" + f"{FENCE}python\n" + KERNEL + "    def more(self):\n        retu"
    answer = parse_kernel(cut)
    assert answer.source is None
    assert answer.error == "unterminated_code_block"


def test_unterminated_fence_after_a_block_without_modelnew():
    cut = block(HELPER) + "Now the kernel:\n" + f"{FENCE}python\n" + KERNEL
    answer = parse_kernel(cut)
    assert answer.source is None
    assert answer.error == "unterminated_code_block"


def test_bare_file_without_fences_is_accepted_with_a_note():
    answer = parse_kernel("\n\n" + KERNEL + "\n\n")
    assert answer.error is None
    assert answer.source == KERNEL
    assert answer.notes == ["no_fences"]


def test_bare_file_with_two_modelnew_is_rejected_like_a_fenced_one():
    # A fenced block with two `class ModelNew` is "two_modelnew"; the same file sent without fences should be too.
    answer = parse_kernel(KERNEL + "\n\n" + KERNEL)
    assert answer.error == "two_modelnew", (
        "a bare file defining ModelNew twice is rejected as two_modelnew "
        f"(got error={answer.error!r}, notes={answer.notes!r})")


def test_crlf_answer_is_parsed_like_an_lf_one():
    # Some endpoints and proxies send CRLF line ends; the fences must still be found and stripped.
    crlf = ("Here it is:\n" + block(KERNEL) + "Done.\n").replace("\n", "\r\n")
    answer = parse_kernel(crlf)
    assert answer.error is None
    source = (answer.source or "").replace("\r\n", "\n")
    assert FENCE not in source and "Here it is" not in source, (
        "fences followed by \\r\\n are found and stripped, leaving only the code without the surrounding prose "
        f"(notes={answer.notes!r})")
    assert source == KERNEL


def test_stated_idea_and_category_before_the_code():
    text = "Idea: stage tiles of A and B in shared memory\nCategory: memory\n\n" + block(KERNEL)
    answer = parse_kernel(text)
    assert answer.source == KERNEL
    assert answer.idea == Idea("stage tiles of A and B in shared memory", "memory")


@pytest.mark.parametrize("category, tag", [
    ("[precision]", "precision"),
    ("asynchrony and latency hiding", "async"),
    ("Parallelism", "parallelism"),
])
def test_stated_category_by_tag_or_name(category, tag):
    answer = parse_kernel(f"Idea: something clever\nCategory: {category}\n" + block(KERNEL))
    assert answer.idea == Idea("something clever", tag)


def test_stated_idea_without_category_line_is_categorized_from_its_words():
    answer = parse_kernel("Idea: unroll the inner loop by 4\n" + block(KERNEL))
    assert answer.idea == Idea("unroll the inner loop by 4", "control")


def test_idea_line_inside_the_code_is_not_a_stated_idea():
    answer = parse_kernel(block("# Idea: not this one\n" + KERNEL))
    assert answer.idea is None and answer.source.startswith("# Idea: not this one")


def test_stated_idea_kept_when_the_answer_has_no_kernel():
    answer = parse_kernel("Idea: fuse the bias add\nCategory: control\nSorry, I ran out of room.")
    assert answer.error == "no_code_block"
    assert answer.idea == Idea("fuse the bias add", "control")


def test_markdown_bold_idea_label_does_not_leak_into_the_idea_text():
    answer = parse_kernel("**Idea:** use vectorized float4 loads\n**Category:** memory\n" + block(KERNEL))
    assert answer.idea is not None and answer.idea.category == "memory"
    assert answer.idea.text == "use vectorized float4 loads", (
        f"'**Idea:** …' is read without the markdown '**' in the text: {answer.idea.text!r}")


# parse_ideas ------------------------------------------------------------------------------------------

IDEAS_JSON = [
    {"idea": "Coalesce global loads with float4", "category": "memory"},
    {"text": "Use bf16 inputs with fp32 accumulation", "category": "data type and precision"},
    {"description": "Raise occupancy with smaller blocks"},  # no category: from its words
    "Unroll the reduction loop",
]


def test_json_list_in_a_json_block():
    text = "Here are my ideas:\n" + block(json.dumps(IDEAS_JSON, indent=2), lang="json") + "\nGood luck."
    ideas, error = parse_ideas(text, 10)
    assert error is None
    assert ideas == [
        Idea("Coalesce global loads with float4", "memory"),
        Idea("Use bf16 inputs with fp32 accumulation", "precision"),
        Idea("Raise occupancy with smaller blocks", "parallelism"),
        Idea("Unroll the reduction loop", "control"),
    ]


def test_bare_json_list():
    text = json.dumps([{"idea": "Prefetch the next tile with cp.async", "category": "async"},
                       {"idea": "Use wgmma instructions", "category": "[compute]"}])
    ideas, error = parse_ideas(text, 5)
    assert error is None
    assert ideas == [Idea("Prefetch the next tile with cp.async", "async"), Idea("Use wgmma instructions", "compute")]


def test_numbered_list_with_tags():
    text = ("Ideas:\n"
            "1. [memory] Tile into shared memory\n"
            "2) [precision] Accumulate in fp32, load fp16\n"
            "3. (control) Fuse the activation into the epilogue\n"
            "4. Split K across thread blocks\n")
    ideas, error = parse_ideas(text, 10)
    assert error is None
    assert ideas == [
        Idea("Tile into shared memory", "memory"),
        Idea("Accumulate in fp32, load fp16", "precision"),
        Idea("Fuse the activation into the epilogue", "control"),
        Idea("Split K across thread blocks", "parallelism"),
    ]


def test_bulleted_list():
    text = "- [async] Double-buffer the loads\n* [compute] Use tensor cores\n• [memory] Pad shared memory\n"
    ideas, error = parse_ideas(text, 10)
    assert error is None
    assert [(i.text, i.category) for i in ideas] == [
        ("Double-buffer the loads", "async"), ("Use tensor cores", "compute"), ("Pad shared memory", "memory")]


def test_duplicates_removed_case_insensitively_first_kept():
    text = "1. [memory] Use shared memory\n2. [compute] USE SHARED MEMORY\n3. [async] Prefetch\n4. use shared memory\n"
    ideas, error = parse_ideas(text, 10)
    assert error is None
    assert ideas == [Idea("Use shared memory", "memory"), Idea("Prefetch", "async")]


def test_json_duplicates_removed_too():
    ideas, error = parse_ideas(json.dumps(["Fuse ops", "fuse OPS", "Unroll"]), 10)
    assert error is None and [i.text for i in ideas] == ["Fuse ops", "Unroll"]


def test_capped_at_count_after_deduplication():
    text = "\n".join(f"{n}. [memory] idea number {n}" for n in range(1, 8))
    ideas, error = parse_ideas("1. [memory] idea number 1\n" + text, 3)
    assert error is None
    assert [i.text for i in ideas] == ["idea number 1", "idea number 2", "idea number 3"]


def test_empty_entries_are_dropped():
    ideas, error = parse_ideas(json.dumps([{"idea": ""}, {"idea": "  "}, {"idea": "Real one", "category": "memory"}]), 5)
    assert error is None and ideas == [Idea("Real one", "memory")]


@pytest.mark.parametrize("text", ["", "I have no ideas today.", "{\"idea\": \"a dict, not a list\"}",
                                  "```json\n[not json\n```"])
def test_garbage_gives_no_ideas(text):
    assert parse_ideas(text, 4) == ([], "no_ideas")


@pytest.mark.parametrize("text", ["[]", "```json\n[]\n```", "Nothing left to try.\n```json\n[ ]\n```"])
def test_an_explicit_empty_list_means_exhausted_not_malformed(text):
    assert parse_ideas(text, 4) == ([], "exhausted")


# category_of ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tag", list(CATEGORIES))
def test_category_tags_and_full_names(tag):
    assert category_of(tag) == tag
    assert category_of(tag.upper()) == tag
    assert category_of(f"[{tag}]") == tag
    assert category_of(f" **{tag}** ") == tag
    assert category_of(CATEGORIES[tag]) == tag
    assert category_of(CATEGORIES[tag].title()) == tag


@pytest.mark.parametrize("label, tag", [
    ("coalesced global loads", "memory"),
    ("vectorize with float4", "memory"),
    ("software pipelining of loads", "async"),
    ("use TMA for the copies", "async"),
    ("switch to bf16", "precision"),
    ("use TF32 tensor math", "precision"),
    ("use tensor cores via mma", "compute"),
    ("raise occupancy", "parallelism"),
    ("a larger block size", "parallelism"),
    ("unroll the k loop", "control"),
    ("fuse bias and relu", "control"),
])
def test_category_keyword_fallbacks(label, tag):
    assert category_of(label) == tag


@pytest.mark.parametrize("label", ["", "   ", "magic", "make it faster", "[other]"])
def test_unknown_category(label):
    assert category_of(label) == "uncategorized"
