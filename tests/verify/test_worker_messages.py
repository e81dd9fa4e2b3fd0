"""What a model is shown of an error in its candidate (verify/worker.py `_trimmed_traceback`, `_said`): the
candidate's own lines and the cause, not the kernel compiler's frames, colours or C++ frames; a compiler's long
output cut to its error lines."""

from __future__ import annotations

import textwrap

from kernelcraft.verify.worker import MESSAGE_LINES, _said, _trimmed_traceback


def _raised_through(tmp_path, package: str, body: str) -> BaseException:
    """The exception a candidate.py gets calling into a module of `package` whose function runs `body`."""
    lib = tmp_path / package
    lib.mkdir()
    (lib / "lower.py").write_text(textwrap.dedent(f"""
        def lower(x):
            return check(x)


        def check(x):
            {body}
        """))
    candidate = tmp_path / "candidate.py"
    candidate.write_text("def forward(lower, x):\n    return lower(x)  # the candidate's call\n")
    namespace: dict = {}
    exec(compile((lib / "lower.py").read_text(), str(lib / "lower.py"), "exec"), namespace)
    own: dict = {}
    exec(compile(candidate.read_text(), str(candidate), "exec"), own)
    try:
        own["forward"](namespace["lower"], 3)
    except Exception as exc:  # noqa: BLE001
        return exc
    raise AssertionError("nothing was raised")


def test_an_error_inside_a_kernel_compiler_shows_the_candidates_line_and_the_cause(tmp_path):
    exc = _raised_through(tmp_path, "tilelang", 'raise ValueError("T.copy: shapes (64, 64) and (64, 32) differ")')
    message = _trimmed_traceback(exc)
    lines = message.splitlines()
    assert lines[0] == 'File "candidate.py", line 2, in forward'
    assert lines[1].strip() == "return lower(x)  # the candidate's call"
    assert lines[2] == "[2 frames of the compiler, the last:]" and "lower.py" in lines[3] and "in check" in lines[3]
    assert lines[-1] == "ValueError: T.copy: shapes (64, 64) and (64, 32) differ"


def test_an_error_elsewhere_keeps_the_tracebacks_last_lines(tmp_path):
    exc = _raised_through(tmp_path, "somelib", 'raise ValueError("bad")')
    message = _trimmed_traceback(exc)
    assert message.startswith("Traceback") and "somelib" in message and message.endswith("ValueError: bad")


def test_a_message_loses_its_colours_and_cpp_frames():
    exc = RuntimeError('\x1b[91m\x1b[1merror:\x1b[0m bad layout\n  File "/project/src/ir/layout.cc", line 68, in f\n'
                       "  hint: use a fragment")
    assert _said(exc) == "error: bad layout\n  hint: use a fragment"


def test_a_compilers_long_output_is_cut_to_its_error_lines():
    source = [f"line {i} of the generated source" for i in range(150)]
    output = ["Compilation error:", "common.h(621): warning #1444-D: deprecated", "    longlong4 result;",
              'kernels.cu(22): error: identifier "no_such_fn" is undefined', "    y[i] = no_such_fn(x[i]);",
              "           ^", '1 error detected in the compilation of "kernels.cu".']
    said = _said(RuntimeError("\n".join(source + output))).splitlines()
    assert said[0] == "line 0 of the generated source" and said[1] == "[157 lines; those that say error:]"
    assert said[2:] == output[3:6]
    plain = _said(RuntimeError("\n".join(source))).splitlines()
    assert len(plain) == MESSAGE_LINES + 1 and plain[-1] == f"[... {150 - MESSAGE_LINES} more lines]"
