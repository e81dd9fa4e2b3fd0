"""propose/parse.py on the shapes real answers take: the project's own kernel files wrapped as models
wrap them (drafts, thinking, lists, tildes, split blocks, cut-offs), each with a twin that must not be
read the same way."""

from __future__ import annotations

import ast
import json

import pytest

from kernelcraft.problems import load_problem
from kernelcraft.propose.base import Idea
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.propose.parse import parse_ideas, parse_kernel
from tests.helpers import FIXTURES, REPO

FENCE = "```"
KERNEL_FILES = [FIXTURES / "relu_triton.py", FIXTURES / "relu_cuda_inline.py", FIXTURES / "relu_nvrtc.py",
                FIXTURES / "search" / "relu_fast.py", REPO / "src/kernelcraft/examples/softmax_triton.py",
                REPO / "src/kernelcraft/examples/softmax_nvrtc.py"]


@pytest.fixture(params=KERNEL_FILES, ids=lambda p: p.name)
def src(request) -> str:
    return request.param.read_text()


def block(body: str, lang: str = "python", fence: str = FENCE, indent: str = "") -> str:
    lines = [indent + line if line else line for line in body.rstrip().split("\n")]
    return f"{indent}{fence}{lang}\n" + "\n".join(lines) + f"\n{indent}{fence}\n"


def split_at_class(src: str) -> tuple[str, str]:
    at = src.index("\nclass ModelNew")
    return src[:at].rstrip() + "\n", src[at + 1:]


def upto_class(src: str, extra_lines: int = 2) -> str:
    """The file down to `class ModelNew` and a few lines into it: a draft given up mid-class."""
    lines = src.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("class ModelNew"))
    return "\n".join(lines[:at + 1 + extra_lines])


def defines_modelnew(source: str) -> bool:
    compile(source, "candidate.py", "exec")
    return any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in ast.parse(source).body)


# 1. a complete draft, then a final block cut off ------------------------------------------------------

@pytest.mark.parametrize("fraction", [0.0, 0.5, 0.97])
def test_a_complete_draft_then_a_cut_off_final_block_is_rejected(src, fraction):
    cut = src[:int(len(src) * fraction)]
    answer = parse_kernel("Draft:\n" + block(src) + "\nNow the final, faster version:\n\n" + FENCE + "python\n" + cut)
    assert answer.source is None and answer.error == "unterminated_code_block"


def test_twin_the_same_answer_with_its_final_block_closed_takes_the_final(src):
    draft = "# draft: launch grid not checked\n" + src
    answer = parse_kernel("Draft:\n" + block(draft) + "\nNow the final version:\n\n" + block(src))
    assert answer.error is None and answer.source == src
    assert answer.notes == ["multiple_code_blocks"]


def test_a_cut_off_tilde_or_list_indented_block_is_rejected_too(src):
    cut = src[:len(src) // 2]
    assert parse_kernel(block(src) + "\n~~~python\n" + cut).error == "unterminated_code_block"
    listed = "1. Final:\n\n   ```python\n   " + cut.replace("\n", "\n   ")
    assert parse_kernel(listed).error == "unterminated_code_block"


# 2. thinking with an abandoned, unclosed fence --------------------------------------------------------

def thinking(src: str) -> str:
    return ("<think>\nThe reference is a row-wise op; one program per row should do. Let me write it.\n"
            + FENCE + "python\n" + upto_class(src) + "\n        hmm, wait, the launch grid is wrong, let me redo "
            "this from the start.\n</think>\n\n")


def test_an_abandoned_draft_fence_before_the_final_block_is_dropped(src):
    answer = parse_kernel(thinking(src) + "Here is the kernel:\n\n" + block(src) + "\nIt fuses the ops.\n")
    assert answer.error is None and answer.source == src
    assert "abandoned_code_block" in answer.notes


def test_an_abandoned_draft_then_a_final_block_opened_by_a_bare_fence(src):
    answer = parse_kernel(thinking(src) + "Here is the kernel:\n\n" + block(src, lang=""))
    assert answer.error is None and answer.source == src


def test_a_fenced_draft_in_thinking_then_the_final_file_without_fences(src):
    draft = "# draft: launch grid not checked\n" + src
    answer = parse_kernel("<think>\n" + block(draft) + "That launch is wrong.\n</think>\n\n" + src)
    assert answer.error is None and answer.source == src
    assert answer.notes == ["multiple_code_blocks", "no_fences"]


def test_twin_prose_after_the_block_naming_modelnew_does_not_replace_it(src):
    answer = parse_kernel(block(src) + "\nclass ModelNew is a drop-in replacement for Model.\n")
    assert answer.error is None and answer.source == src and answer.notes == []


def test_twin_an_answer_that_ends_in_the_abandoned_draft_is_cut_off(src):
    assert parse_kernel(thinking(src)).error == "unterminated_code_block"


# 3. a block under a list item --------------------------------------------------------------------------

@pytest.mark.parametrize("indent", ["   ", "    ", "\t"])
def test_a_block_indented_under_a_list_item_loses_the_indentation(src, indent):
    text = ("1. The kernel keeps each row in registers.\n2. The full file:\n\n" + block(src, indent=indent)
            + "\n3. Launch one program per row.\n")
    answer = parse_kernel(text)
    assert answer.error is None and answer.source == src


def test_twin_body_lines_indented_less_than_the_fence_are_kept_whole():
    # a model that indents the fences but not the code: nothing of the code is cut away
    src = KERNEL_FILES[0].read_text()
    answer = parse_kernel("- The file:\n\n    ```python\n" + src + "    ```\n")
    assert answer.error is None and answer.source == src


# 4. prose before bare code -----------------------------------------------------------------------------

def test_one_line_of_prose_before_bare_code_is_dropped(src):
    answer = parse_kernel("Here is the optimized kernel:\n" + src)
    assert answer.error is None and answer.source == src and answer.notes == ["no_fences"]


def test_prose_before_and_after_bare_code_is_dropped(src):
    answer = parse_kernel("Here is the optimized kernel:\n\n" + src + "\nThis kernel uses one program per row.\n")
    assert answer.error is None and answer.source == src


def test_a_stated_idea_before_bare_code_is_read_and_left_out_of_the_source(src):
    answer = parse_kernel("Idea: load four floats per thread\nCategory: memory\n\n" + src)
    assert answer.source == src and answer.idea == Idea("load four floats per thread", "memory")


@pytest.mark.parametrize("where, broken_line", [("at the top", ("import torch\n", "import torch as\n")),
                                               ("in ModelNew", ("class ModelNew", "class ModelNew("))])
def test_twin_bare_code_with_a_syntax_error_is_kept_whole(src, where, broken_line):
    # not cut down to a tail that happens to parse: the verifier names the error where it is
    broken = src.replace(*broken_line, 1)
    answer = parse_kernel("Here is the optimized kernel:\n" + broken)
    assert answer.error is None and answer.source == broken  # the verifier names the syntax error
    with pytest.raises(SyntaxError):
        compile(answer.source, "candidate.py", "exec")


# 5. tildes ---------------------------------------------------------------------------------------------

def test_a_tilde_fenced_block(src):
    answer = parse_kernel("Here it is:\n\n" + block(src, fence="~~~") + "\nDone.\n")
    assert answer.error is None and answer.source == src


def test_a_longer_fence_is_closed_only_by_one_at_least_as_long(src):
    answer = parse_kernel(block(src, fence="````"))
    assert answer.error is None and answer.source == src
    # a ``` line does not close a ~~~ block, nor a ```` one: still open where the answer ends
    assert parse_kernel("~~~python\n" + src + FENCE + "\n").error == "unterminated_code_block"
    assert parse_kernel("````python\n" + src + FENCE + "\n").error == "unterminated_code_block"


# 6. a helper block and a ModelNew block ---------------------------------------------------------------

def test_a_kernel_block_then_a_modelnew_block_are_joined(src):
    kernel, model = split_at_class(src)
    answer = parse_kernel("First the kernel:\n\n" + block(kernel) + "\nThen the module:\n\n" + block(model))
    assert answer.error is None and "joined_code_blocks" in answer.notes
    assert answer.source == src and defines_modelnew(answer.source)


def test_a_kernel_block_without_imports_gets_the_modelnew_blocks_imports_first():
    src = (REPO / "src/kernelcraft/examples/softmax_triton.py").read_text()
    head_end = src.index("\n\n\n@triton.jit")
    head, model = src[:head_end + 1], split_at_class(src)[1]
    kernel = src[head_end + 3:src.index("\n\n\nclass ModelNew") + 1]
    answer = parse_kernel("The kernel:\n\n" + block(kernel) + "\nThe module:\n\n" + block(head + "\n\n" + model))
    assert answer.error is None and answer.source == src  # docstring and imports, kernel, ModelNew


def test_a_modelnew_block_then_the_kernel_block_it_calls_are_joined(src):
    kernel, model = split_at_class(src)
    answer = parse_kernel("The module:\n\n" + block(model) + "\nAnd the kernel it calls:\n\n" + block(kernel))
    assert answer.error is None and "joined_code_blocks" in answer.notes
    assert ast.dump(ast.parse(answer.source)) == ast.dump(ast.parse(model + "\n" + kernel))


def test_twin_several_complete_versions_take_the_last_without_joining(src):
    first = src.replace("class ModelNew", "# first version\nclass ModelNew", 1)
    answer = parse_kernel(block(first) + "\nHmm, better:\n" + block(src))
    assert answer.source == src and answer.notes == ["multiple_code_blocks"]


def test_twin_blocks_the_modelnew_block_does_not_need_are_not_joined(src):
    usage = "x = torch.randn(4096, 4096, device='cuda')\nmodel = ModelNew()\nprint(model(x).shape)\n"
    cuda = "__global__ void k(float* y) { y[threadIdx.x] = 0.0f; }\n"
    answer = parse_kernel(block(usage) + block(cuda, lang="cuda") + "The kernel:\n" + block(src) + block(usage))
    assert answer.error is None and answer.source == src and answer.notes == []


def test_twin_a_cuda_block_is_never_joined_as_python():
    src = (FIXTURES / "relu_cuda_inline.py").read_text()
    cuda_at = src.index('CUDA = r"""')
    cuda = src[cuda_at + len('CUDA = r"""'):src.index('"""', cuda_at + 11)]
    model = src.replace(src[cuda_at:src.index('"""', cuda_at + 11) + 3] + "\n", "")  # CUDA now undefined
    answer = parse_kernel(block(cuda, lang="cuda") + block(model))
    assert answer.source == model and answer.notes == []  # the verifier reports the NameError


# 7. ideas JSON with trailing commas and comments -------------------------------------------------------

@pytest.fixture(scope="module")
def moves() -> list[Idea]:
    """The built-in engineer's ideas for level1/softmax: real idea texts and categories."""
    engineer = BuiltinProposer("cpu")
    analysis = engineer.coverage(load_problem("level1/softmax"), "triton")
    ideas = [Idea(m.text, m.category) for m in engineer.moves(analysis.single, "triton")]
    engineer.close()
    return ideas


def json_list(ideas: list[Idea], trailing_comma: bool = False, comments: bool = False) -> str:
    rows = []
    for n, i in enumerate(ideas):
        row = "  " + json.dumps({"idea": i.text, "category": i.category})
        row += "," if n < len(ideas) - 1 or trailing_comma else ""
        rows.append(row + (f"  // {i.category}" if comments else ""))  # a comment after the comma
    return "[\n" + "\n".join(rows) + "\n]"


def test_ideas_json_with_a_trailing_comma(moves):
    assert parse_ideas(block(json_list(moves, trailing_comma=True), "json"), 10) == (moves, None)


def test_ideas_json_with_line_comments_and_a_trailing_comma(moves):
    text = "Here are my ideas:\n" + block(json_list(moves, trailing_comma=True, comments=True), "json")
    assert parse_ideas(text, 10) == (moves, None)


def test_twin_commas_and_slashes_inside_strings_are_kept():
    text = '[{"idea": "Split rows, ], then reduce // twice", "category": "parallelism"},]'
    assert parse_ideas(text, 4) == ([Idea("Split rows, ], then reduce // twice", "parallelism")], None)


def test_twin_broken_json_is_no_ideas_not_the_reasoning_list():
    broken = '[{"idea": "Load once", "category": memory}'  # an unquoted value, no closing bracket
    text = "1. The reference reads each row twice.\n2. So:\n" + block(broken, "json")
    assert parse_ideas(text, 4) == ([], "no_ideas")


# 8. numbered reasoning, then the ideas -----------------------------------------------------------------

REASONING = ("Let me think about where the time goes.\n"
             "1. First, the reference computes a softmax over each row of a (4096, 65536) tensor.\n"
             "2. The bottleneck is memory bandwidth: the row is read twice and written once.\n"
             "3. So the ideas should cut a pass and keep the loads wide.\n\n")


def test_numbered_reasoning_then_a_json_block(moves):
    assert parse_ideas(REASONING + block(json_list(moves), "json"), 10) == (moves, None)


def test_numbered_reasoning_then_a_bare_json_list(moves):
    assert parse_ideas(REASONING + "Ideas: " + json_list(moves, trailing_comma=True) + "\n", 10) == (moves, None)


def test_numbered_reasoning_then_a_list_of_ideas_takes_the_last_list(moves):
    listed = "".join(f"{n}. [{i.category}] {i.text}\n" for n, i in enumerate(moves, 1))
    assert parse_ideas(REASONING + "My ideas:\n" + listed, 10) == (moves, None)
    # without prose between them, the numbering starting again marks the new list
    assert parse_ideas(REASONING.replace("\n\n", "\n") + listed, 10) == (moves, None)


def test_sub_items_of_the_ideas_list_are_not_ideas(moves):
    listed = "".join(f"{n}. [{i.category}] {i.text}\n   - why: it saves a pass\n" for n, i in enumerate(moves, 1))
    assert parse_ideas("Ideas:\n" + listed, 10) == (moves, None)


def test_twin_an_empty_list_in_the_prose_after_the_ideas_is_not_exhaustion(moves):
    text = REASONING + json_list(moves) + "\nIf none of these apply, the reference already returns [] work to do.\n"
    assert parse_ideas(text, 10) == (moves, None)


def test_twin_a_json_list_wins_over_any_list_after_it(moves):
    after = "\nWhy these:\n1. The first one saves a pass.\n2. The second one widens the loads.\n"
    assert parse_ideas(REASONING + block(json_list(moves), "json") + after, 10) == (moves, None)


@pytest.mark.parametrize("lang", ["gluon", "helion", "cute", "cutedsl", "tilelang"])
def test_a_kernel_block_fenced_by_its_kernel_languages_name_is_joined_as_python(lang):
    """A model asked for a Python-embedded kernel language may tag its fences with the language's name."""
    src = (REPO / "src/kernelcraft/examples/softmax_tilelang.py").read_text()
    kernel, model = split_at_class(src)
    answer = parse_kernel("The kernel:\n\n" + block(kernel, lang=lang) + "\nThe module:\n\n" + block(model, lang=lang))
    assert answer.error is None and "joined_code_blocks" in answer.notes and answer.source == src
