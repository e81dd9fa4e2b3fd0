"""propose/feedback.py: the verifier's verdict as text for a proposer, from real Results (some read back from JSON,
as the store hands them back)."""

from __future__ import annotations

import json

from kernelcraft.propose.feedback import LOG_LINES, OUTPUT_LIMIT, render
from kernelcraft.result import Result, Timing


def timing(ms: float) -> Timing:
    return Timing(median_ms=ms, iqr_ms=ms / 100, cv=0.01, samples=50, min_ms=ms * 0.98, method="cpu_perf_counter")


def base(**kw) -> Result:
    return Result(problem="level1/relu", candidate="c1", backend="cuda_inline", device="cpu", **kw)


def as_stored(result: Result) -> Result:
    """What the store hands back: the Result after a JSON round trip."""
    return Result.from_dict(json.loads(json.dumps(result.to_dict())))


def test_parse_error_text():
    text = render(None, "unterminated_code_block")
    assert text.startswith("Your answer could not be used: unterminated code block.")
    assert "```python" in text and "class ModelNew" in text


def test_parse_error_wins_over_a_result():
    r = base()
    r.fail("incorrect", "mismatch", "values differ")
    text = render(r, "no_modelnew")
    assert "no modelnew" in text and "Status" not in text


def test_no_result():
    assert render(None) == "This kernel was not evaluated."


def test_an_answer_cut_by_the_output_limit_is_asked_again_shorter():
    text = render(None, OUTPUT_LIMIT, output_limit=16000)
    assert text.startswith("Your answer hit the 16000-token output limit before it ended: answer again, shorter")
    assert "unterminated" not in text and "```python" in text
    assert render(None, OUTPUT_LIMIT).startswith("Your answer hit the output limit before it ended")


def test_a_cut_off_answer_whose_kernel_was_complete_is_judged_with_a_note():
    r = base(correct=True, status="ok", runtime=timing(1.0))
    text = render(r, None, output_limit=4096)
    assert text.startswith("Note: your answer hit the 4096-token output limit; its kernel was complete and was judged")
    assert "Status: ok" in text and "Runtime: 1.0000 ms" in text


def test_compile_error_keeps_error_lines_of_a_long_log_within_limit():
    log = [f"[{i}/200] building object step_{i}.o" for i in range(200)]
    log[10] = "kernel.cu(12): error: identifier \"blockDimx\" is undefined"
    log[11] = "kernel.cu(30): error: expected a \";\""
    log[120] = "kernel.cu(44): warning: variable \"t\" was declared but never used"
    log[150] = "ninja: build stopped: subcommand failed. ERROR"
    r = base()
    r.fail("compile_error", "compile_failed", "nvcc exited with status 1")
    r.compile_log = "\n".join(log) + "\n"
    text = render(r)
    lines = text.splitlines()
    assert lines[0] == "Status: compile_error (compile_failed)"
    assert lines[1] == "Message: nvcc exited with status 1"
    assert lines[2] == "Compiler output:"
    shown = lines[3:]
    assert 0 < len(shown) <= LOG_LINES
    # the errors from deep inside the log come first, in order, then the log's tail
    assert shown[:3] == [log[10], log[11], log[150]]
    assert shown[-1] == log[-1]
    assert log[0] not in shown and log[120] not in shown
    assert len(shown) == len(set(shown))  # no line shown twice


def test_compile_error_with_many_error_lines_stays_within_limit():
    log = [f"kernel.cu({i}): error: something wrong #{i}" for i in range(100)]
    r = base()
    r.fail("compile_error", "compile_failed", "build failed")
    r.compile_log = "\n".join(log)
    shown = render(r).split("Compiler output:\n", 1)[1].splitlines()
    assert len(shown) <= LOG_LINES
    assert shown[0] == log[0]  # the first error is the one that matters


def test_short_compile_log_shown_whole():
    log = ["nvcc -O3 kernel.cu", "kernel.cu(3): error: bad", "1 error detected"]
    r = base()
    r.fail("compile_error", "compile_failed", "x")
    r.compile_log = "\n".join(log)
    shown = render(r).split("Compiler output:\n", 1)[1].splitlines()
    assert sorted(shown) == sorted(log) and shown[0] == "kernel.cu(3): error: bad"


def test_compile_log_not_shown_for_other_statuses():
    r = base()
    r.fail("runtime_error", "cuda_error", "illegal memory access")
    r.compile_log = "nvcc: warning: something"
    text = render(r)
    assert "Compiler output" not in text and "nvcc" not in text
    assert text == "Status: runtime_error (cuda_error)\nMessage: illegal memory access"


def test_incorrect_result():
    r = base(policy="strict")
    r.fail("incorrect", "mismatch", "output differs from the reference in 12 of 4096 elements")
    r.flag("nan_in_output", "the output holds NaN")
    r.max_rel_error = 0.0123456
    r.trials = 3
    text = render(as_stored(r))
    lines = text.splitlines()
    assert lines[0] == "Status: incorrect (mismatch, nan_in_output)"
    assert lines[1] == "Message: output differs from the reference in 12 of 4096 elements"
    assert "Largest relative error: 0.0123 (policy strict)" in lines
    assert "Runtime" not in text and "Kernels that ran" not in text


def test_long_message_is_cut():
    r = base()
    r.fail("runtime_error", "exception", "x" * 5000)
    line = render(r).splitlines()[1]
    assert line == "Message: " + "x" * 1500


def test_ok_result_runtime_speedups_roofline_and_kernels():
    r = base()
    r.status, r.correct = "ok", True
    r.runtime, r.eager, r.compiled = timing(0.125), timing(0.5), timing(0.25)
    r.speedup_eager, r.speedup_compile = 4.0, 2.0
    r.roofline_fraction = 0.634
    r.max_rel_error = 1e-6
    r.kernels = [
        {"name": "at::native::vectorized_elementwise_kernel", "custom": False, "calls": 1, "device_us": 25.0,
         "streams": [7]},
        {"name": "relu_kernel", "custom": True, "calls": 2, "device_us": 75.0, "streams": [7]},
    ]
    r.kernels_resources = [{"kernel": "relu_kernel", "registers": 32, "spills": 0}]
    text = render(as_stored(r))
    lines = text.splitlines()
    assert lines[0] == "Status: ok"
    assert "Message" not in text
    assert "Largest relative error: 1e-06 (policy strict)" in lines
    runtime = next(l for l in lines if l.startswith("Runtime:"))
    assert runtime == ("Runtime: 0.1250 ms; PyTorch eager 0.5000 ms (4.00x); torch.compile 0.2500 ms (2.00x); "
                       "63% of the roofline bound")
    at = lines.index("Kernels that ran (share of device time):")
    assert lines[at + 1] == "  relu_kernel  75%  x2  (yours)"  # the largest first
    assert lines[at + 2] == "  at::native::vectorized_elementwise_kernel  25%  x1  (library)"
    assert lines[at + 3] == "ptxas: kernel=relu_kernel, registers=32, spills=0"
    assert len(lines) == at + 4


def test_ok_result_without_baselines_shows_runtime_only():
    r = base()
    r.status, r.correct = "ok", True
    r.runtime = timing(2.0)
    text = render(r)
    assert "Runtime: 2.0000 ms" in text.splitlines()
    assert "eager" not in text and "torch.compile" not in text and "roofline" not in text
    assert "Kernels that ran" not in text


def test_kernel_list_at_most_six_and_names_cut():
    r = base()
    r.status, r.correct = "ok", True
    r.runtime = timing(1.0)
    r.kernels = [{"name": f"k{i}_" + "n" * 200, "custom": i == 0, "calls": 1, "device_us": float(i + 1)}
                 for i in range(8)]
    lines = render(r).splitlines()
    at = lines.index("Kernels that ran (share of device time):")
    shown = lines[at + 1:]
    assert len(shown) == 6
    assert shown[0].startswith("  k7_") and shown[-1].startswith("  k2_")
    # shares are of all eight kernels' time (36 us): 8/36 = 22%
    assert shown[0] == "  " + ("k7_" + "n" * 200)[:90] + "  22%  x1  (library)"


def test_rejected_after_timing_renders_without_speedups():
    # The supervisor sets runtime (judge.timing) and the baselines before the clock cross-check; when that
    # check rejects the kernel it returns before the speedups are computed: runtime and eager, no speedup.
    r = base()
    r.runtime, r.eager, r.compiled = timing(0.1), timing(0.5), timing(0.3)
    r.fail("rejected", "timing_mismatch", "the supervisor's clock saw 0.9 ms per call, the candidate's events 0.1 ms")
    d = r.to_dict()
    assert d["runtime_ms"] == 0.1 and d["eager_ms"] == 0.5 and d["speedup_eager"] is None
    text = render(r)
    assert text.startswith("Status: rejected (timing_mismatch)")
    assert "the supervisor's clock saw 0.9 ms per call" in text


TRACEBACK = '''Traceback (most recent call last):
  File "/work/main/src/kernelcraft/verify/worker.py", line 54, in call
    return fn(*args)
           ^^^^^^^^^
  File "/opt/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", line 1779, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/opt/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", line 1790, in _call_impl
    return forward_call(*args, **kwargs)
''' + "".join(f'  File "/opt/venv/lib/python3.12/site-packages/triton/runtime/jit.py", line {n}, in run\n'
              f"    kernel = self.compile(src, target=target, options=options.__dict__)\n" for n in range(20)) + \
'''  File "/tmp/kernelcraft-worker-abc123/candidate.py", line 41, in forward
    softmax_kernel[grid](x, y, n, BLOCK=n)
  File "/opt/venv/lib/python3.12/site-packages/triton/language/core.py", line 1612, in arange
    return semantic.arange(start, end, _builder)
ValueError: arange's range must be a power of 2
'''


def test_a_traceback_reaches_the_model_exception_first_with_the_candidates_frames_only():
    r = base()
    r.fail("runtime_error", "candidate_raised", TRACEBACK)
    text = render(r)
    lines = text.splitlines()
    assert len(TRACEBACK) > 1500  # a cut from the top, as before, would have lost the exception
    assert lines[1] == "Message: ValueError: arange's range must be a power of 2"
    assert lines[2] == "In your file (most recent call last):"
    assert lines[3] == '  File "candidate.py", line 41, in forward'
    assert lines[4] == "    softmax_kernel[grid](x, y, n, BLOCK=n)"
    assert "site-packages" not in text and "kernelcraft" not in text and "worker" not in text


def test_a_chained_traceback_shows_the_last_exception_and_a_multi_line_message_whole():
    chained = ('Traceback (most recent call last):\n  File "/tmp/kernelcraft-worker-x/candidate.py", line 3, in f\n'
               '    g()\nKeyError: 1\n\nThe above exception was the direct cause of the following exception:\n\n'
               'Traceback (most recent call last):\n  File "/opt/site-packages/triton/compiler.py", line 9, in c\n'
               '    raise CompilationError(src)\ntriton.compiler.errors.CompilationError: at 5:12:\n'
               '    x = tl.load(p)\n            ^\nunsupported pointer type\n')
    r = base()
    r.fail("runtime_error", "candidate_raised", chained)
    text = render(r)
    assert "Message: triton.compiler.errors.CompilationError: at 5:12:\n    x = tl.load(p)\n            ^\n" \
           "unsupported pointer type" in text
    assert "(raised outside your file" in text and "KeyError" not in text


def test_hardware_counters_end_the_feedback_of_a_profiled_kernel():
    """--profile: a stored profile (here summarised from recorded ncu output) closes the feedback."""
    from kernelcraft.verify.profile import summarize
    from kernelcraft.verify.profile.ncu import parse_raw
    from tests.helpers import FIXTURES

    r = base()
    r.status, r.correct = "ok", True
    r.runtime, r.eager = timing(0.125), timing(0.5)
    r.speedup_eager = 4.0
    profile = summarize(parse_raw((FIXTURES / "ncu" / "raw_h100.csv").read_text()), {"smem_conflict"}).to_dict()
    profile = json.loads(json.dumps(profile))  # as the store hands it back
    plain = render(as_stored(r))
    text = render(as_stored(r), None, profile=profile)
    assert text.startswith(plain + "\n")
    added = text[len(plain) + 1:].splitlines()
    assert added[0] == "Hardware counters (times are ncu's: each kernel replayed, caches flushed):"
    assert added[1].startswith("Nsight Compute, one call of the candidate: 2 kernels")
    assert added[2].startswith("1. smem_conflict (yours) x2") and "bank-conflicted" in added[2]
    assert added[1:] == profile["summary"].splitlines()
    # no profile, an error on record, or a parse error: nothing about counters
    assert "Hardware counters" not in render(as_stored(r), None, profile=None)
    assert "Hardware counters" not in render(as_stored(r), None, profile={"error": "timeout", "reason": "timeout"})
    assert "Hardware counters" not in render(None, "no_code_block", profile=profile)
