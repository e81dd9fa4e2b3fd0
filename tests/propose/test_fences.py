"""propose/fences.py: fenced blocks read line by line, open, closed and abandoned."""

from __future__ import annotations

from kernelcraft.propose.fences import inside, scan


def test_closed_blocks_with_their_language_and_lines():
    text = "Intro\n```Python title=kernel.py\nx = 1\n```\ntext\n~~~\ny = 2\n~~~\n"
    fences = scan(text)
    read = [(b.lang, b.body, b.first, b.last) for b in fences.closed]
    assert read == [("python", "x = 1", 1, 3), ("", "y = 2", 5, 7)]
    assert fences.closed[0].info == "Python title=kernel.py"
    assert fences.open is None and not fences.cut_off and fences.first_line() == 1


def test_a_closing_fence_has_the_same_character_at_least_as_long_and_no_info():
    fences = scan("````python\na\n```\n~~~~\n````` \n")
    assert [b.body for b in fences.closed] == ["a\n```\n~~~~"]


def test_an_opening_fence_inside_a_block_abandons_it():
    fences = scan("```python\ndraft, given up\n```python\nfinal\n```\n")
    assert [b.body for b in fences.abandoned] == ["draft, given up"]
    assert [b.body for b in fences.closed] == ["final"]


def test_open_at_the_end_is_cut_off_unless_a_bare_stray_fence():
    assert scan("```python\nx = 1\n").cut_off
    assert scan("```python\n").cut_off  # the final block had just begun
    assert scan("```\nhalf a kernel").cut_off
    stray = scan("```python\nx = 1\n```\n```\n")
    assert stray.open is not None and not stray.cut_off


def test_inline_triple_backticks_are_no_fence():
    assert scan("Use ```python``` blocks.\n").first_line() is None


def test_the_fences_indentation_leaves_the_body_as_far_as_every_line_has_it():
    under_item = "1. Item\n\n   ```python\n   def f():\n       return 1\n\n   ```\n"
    code_not_indented = "- x\n    ```\ndef g():\n    pass\n    ```\n"
    fences = scan(under_item + code_not_indented)
    assert [b.body for b in fences.closed] == ["def f():\n    return 1\n", "def g():\n    pass"]


def test_inside_marks_every_line_of_every_block():
    text = "a\n```\nb\n```\nc"
    assert inside(scan(text), 5) == [False, True, True, True, False]
