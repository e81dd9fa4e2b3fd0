"""An apply in the terminal: the region table names which measurement each figure is (issue: a GPT-2 region's 2.8%
share printed beside 0.0281 ms, its run's time alone, while the profile that gave the share had 0.0866 ms)."""

from __future__ import annotations

from rich.console import Console

from kernelcraft.report.apply import apply_view


def _summary() -> dict:
    region = {"name": "09_linear_addmm", "kind": "linear", "share": 0.028, "ms": 0.0866, "eager_ms": 0.0281,
              "kernel_ms": 0.0412, "speedup_eager": 0.68, "speedup_compile": 0.55, "status": "slower",
              "reason": "its best kernel runs at 0.68x PyTorch's speed", "run_id": "run-1"}
    skipped = {"name": "10_layout_view", "kind": "layout", "share": 0.001, "ms": 0.0031, "eager_ms": None,
               "kernel_ms": None, "speedup_eager": None, "speedup_compile": None, "status": "skipped",
               "reason": "it only reshapes or copies", "run_id": None}
    return {"apply_id": "apply-1", "model": "gpt2", "method": "export", "device": "cuda", "status": "done",
            "regions": [region, skipped], "profile": None, "end_to_end": None, "times": None, "notes": []}


def test_each_figure_of_a_region_says_which_measurement_it_is():
    console = Console(width=220, record=True)
    console.print(apply_view(_summary()))
    text = console.export_text()
    header = next(line for line in text.splitlines() if "region" in line and "share" in line)
    assert header.index("share") < header.index("in profile") < header.index("PyTorch") < header.index("kernel")
    row = next(line for line in text.splitlines() if line.startswith("09_linear_addmm") or "09_linear_addmm" in line)
    assert row.index("2.8%") < row.index("0.0866 ms") < row.index("0.0281 ms") < row.index("0.0412 ms")
    skipped = next(line for line in text.splitlines() if "10_layout_view" in line)
    assert "0.0031 ms" in skipped and skipped.count("—") >= 4  # no run: no time alone, no kernel, no speedups
    assert "share and in profile: the model's profile" in " ".join(text.split())


def test_a_kernel_in_the_compiled_model_given_back_says_so_in_both_views():
    """BERT bf16 on an H200: the eager form was never verified (torch.compile was faster than its kernels predict),
    so its attention regions were 'dropped', while their kernels were in the compiled model with CUDA graphs that
    apply gave back. The row said 'dropped'."""
    from kernelcraft.report.apply_html import _regions
    from kernelcraft.report.apply_html import _summary as _summary_html

    summary = _summary()
    attention = {"name": "08_attention_sdpa", "kind": "attention", "share": 0.05, "ms": 0.29, "eager_ms": 0.10,
                 "kernel_ms": 0.0995, "speedup_eager": 1.02, "speedup_compile": 1.78, "status": "dropped",
                 "reason": "torch.compile of the model is faster than its kernels predict", "run_id": "run-2"}
    summary["regions"].append(attention)
    summary.update(final_regions=["08_attention_sdpa"], compiled={"regions": ["08_attention_sdpa"],
                                                                  "cuda_graphs": True, "end_to_end": None})
    console = Console(width=400, record=True)
    console.print(apply_view(summary))
    lines = console.export_text().splitlines()
    row = next(line for line in lines if "08_attention_sdpa" in line)
    assert "in the model given back: compiled with its kernels, CUDA graphs (the eager form: dropped" in row
    slower = next(line for line in lines if "09_linear_addmm" in line)
    assert "slower: its best kernel" in slower  # a region not in the final model keeps its own status
    assert not any("no region was replaced" in line for line in lines)
    assert any("the model with its kernels, eager: not verified" in line for line in lines)
    html = _regions(summary)
    assert "in the model given back" in html and "the eager form: dropped" in html
    assert "no region was replaced" not in _summary_html(dict(summary, replaced_share=0.0))
