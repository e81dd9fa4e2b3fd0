"""`kernelcraft apply` end to end on the CPU (the built-in engineer, the Triton interpreter): through the CLI, a
model whose one region has a kernel and whose other the engineer cannot cover (said, naming the op; the rest goes
on); the apply stored, shown, resumed without running its regions again, and its kernels swapped into a live model;
a model file in the model-and-inputs form reassembled and verified; and an upstream level-3 model at small sizes."""

from __future__ import annotations

import json

import pytest
import torch

import kernelcraft
from kernelcraft import api
from kernelcraft.apply.outcome import ApplyOutcome
from kernelcraft.apply.settle import cannot_beat_compile
from kernelcraft.apply.times import final_of, host_bound
from kernelcraft.cli import main
from kernelcraft.problems import load_problem
from kernelcraft.store import Store
from tests.apply.conftest import DEVICE
from tests.helpers import KERNELBENCH

MODEL = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.fc = nn.Linear(features, classes)

    def forward(self, x):
        return torch.sort(torch.relu(self.fc(x)), dim=1)[0]


batch_size, features, classes = 16, 32, 24


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, classes]
'''

FAST = ["--device", DEVICE, "--rounds", "1", "--max-candidates", "1", "--no-compile-baseline", "--timing-budget",
        "0.3", "--min-share", "0"]


def _last_json(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_apply_through_the_cli_then_show_resume_and_swap(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    path, store, out = tmp_path / "fc_sort.py", tmp_path / "runs.db", tmp_path / "out"
    path.write_text(MODEL)
    assert main(["apply", str(path), *FAST, "--replace", "correct", "--store", str(store), "--out", str(out),
                 "--json"]) == 0
    summary = _last_json(capsys)
    regions = {r["name"]: r for r in summary["regions"]}
    assert summary["status"] == "done" and summary["method"] == "fx", summary
    assert regions["00_linear_linear"]["status"] == "replaced" and regions["00_linear_linear"]["result"]["correct"]
    uncovered = regions["01_other_sort"]
    assert uncovered["status"] == "not_covered" and "cannot cover 01_other_sort: sort" in uncovered["reason"]
    assert summary["end_to_end"]["correct"] and summary["end_to_end"]["custom_kernel_fraction"] > 0
    assert summary["model_file"] == str(out / "model_new.py")
    assert json.loads((out / "apply.json").read_text())["apply_id"] == summary["apply_id"]
    assert sorted(p.name for p in (out / "regions").glob("*.py")) == ["00_linear_linear.py", "01_other_sort.py"]

    assert main(["apply", "--show", summary["apply_id"], "--store", str(store), "--json"]) == 0
    assert _last_json(capsys)["regions"] == summary["regions"]
    assert main(["apply", "--list", "--store", str(store)]) == 0
    assert summary["apply_id"] in capsys.readouterr().out
    page = tmp_path / "apply.html"
    assert main(["report", summary["apply_id"], "--store", str(store), "--html", str(page), "--json"]) == 0
    report = _last_json(capsys)
    assert report["kind"] == "apply" and [r["run"]["run_id"] for r in report["runs"]] == \
        [regions["00_linear_linear"]["run_id"]]
    html = page.read_text()
    assert "01_other_sort" in html and "not_covered" in html and 'aria-label="region times"' in html
    assert f'id="run-{regions["00_linear_linear"]["run_id"]}"' in html
    assert "<th>status</th><th>why</th><th>run</th>" in html and "td a.mono { white-space: nowrap; }" in html
    assert '<th class="n">share</th><th class="n">in profile</th><th class="n">PyTorch</th>' in html
    assert main(["report", summary["apply_id"][:20], "--store", str(store)]) == 0
    assert "end to end: correct" in capsys.readouterr().out

    s = Store(store)
    runs = [r.id for r in s.runs(apply_id=summary["apply_id"])]
    assert runs == [regions["00_linear_linear"]["run_id"]]
    again = api.apply(resume=summary["apply_id"][:16], store=store)  # a prefix names it
    assert again.apply_id == summary["apply_id"] and again.end_to_end.correct
    assert [r.run_id for r in again.regions if r.run_id] == runs  # the finished region run is reused
    assert len(s.runs(apply_id=summary["apply_id"])) == 1 and s.apply(summary["apply_id"]).status == "done"
    stored = s.apply(summary["apply_id"])
    outcome = ApplyOutcome.of(stored)  # the stored summary read back typed, and written again unchanged
    assert json.loads(json.dumps(outcome.to_dict())) == stored.summary
    linear = next(r for r in outcome.regions if r.name == "00_linear_linear")
    assert linear.move and linear.move == regions["00_linear_linear"]["move"] and linear.result.correct
    assert outcome.replaced == [linear] and outcome.profile.regions and outcome.speedup_eager is not None
    s.close()

    module = load_problem(path).load()
    torch.manual_seed(123)  # weights the apply never saw
    model = module.Model(*module.get_init_inputs()).eval().to(DEVICE)
    fast = kernelcraft.apply(model, out)
    x = module.get_inputs()[0].to(DEVICE)
    with torch.no_grad():
        torch.testing.assert_close(fast(x), model(x), rtol=1e-4, atol=1e-4)
    with pytest.raises(kernelcraft.apply.engine.ApplyError, match="training mode"):
        kernelcraft.apply(model.train(), out)


@pytest.mark.skipif(not KERNELBENCH.exists(), reason=f"no KernelBench copy at {KERNELBENCH}")
def test_an_upstream_level3_model_at_small_sizes(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    outcome = api.apply(str(KERNELBENCH / "level3" / "1_MLP.py"), device=DEVICE, size="small", rounds=1,
                        max_candidates=1, compile_baseline=False, timing_budget=0.3, min_share=0.0, replace="correct",
                        sizes="batch_size=3", store=tmp_path / "runs.db", out_dir=tmp_path / "o")
    assert outcome.status == "done" and outcome.method == "fx"
    assert len(outcome.replaced) == 3 and outcome.end_to_end.correct, outcome.to_dict()
    assert outcome.end_to_end.sizes["constants"]["batch_size"] == 3


UNCAPTURABLE = MODEL.replace("return torch.sort(torch.relu(self.fc(x)), dim=1)[0]",
                             "return self.fc(x) if x.sum() > 0 else -self.fc(x)")


def test_a_model_neither_fx_nor_export_can_capture_is_one_clear_line(tmp_path, capsys, monkeypatch):
    """Exit 2 and one line saying what stopped the capture and what to change: in JSON the summary too, without
    JSON no empty table before it, and the error said once."""
    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    path = tmp_path / "branchy.py"
    path.write_text(UNCAPTURABLE)
    assert main(["apply", str(path), *FAST, "--store", str(tmp_path / "runs.db"), "--out", str(tmp_path / "o"),
                 "--json"]) == 2
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert summary["status"] == "failed" and summary["regions"] == []
    said = captured.err.strip().splitlines()[-1]
    assert said.startswith("kernelcraft apply: cannot capture the model: torch.fx could not trace it: its forward "
                           "branches on a tensor value") and "torch.export failed too" in said
    assert said.endswith("does not branch on tensor values: change what the message names")
    assert main(["apply", str(path), *FAST, "--store", str(tmp_path / "runs.db"), "--out", str(tmp_path / "o")]) == 2
    captured = capsys.readouterr()
    assert captured.out.strip() == "" and captured.err.count("cannot capture the model") == 1


def test_a_capture_error_names_the_cache_a_model_returns_and_is_cut_at_a_word():
    """transformers' GPT-2 with its default use_cache=True: torch.export fails on the DynamicCache in its output,
    with a message longer than a line holds (it was cut mid-word)."""
    from kernelcraft.apply.capture import _first_line, _what_to_change

    exc = RuntimeError("Found <class 'transformers.cache_utils.DynamicCache'> in output, which is not a known type. "
                       "If this type holds tensors, you need to register a pytree for it. See https://example.org/475 "
                       "for a brief explanation why. If you don't need to register a pytree, please leave a comment "
                       "explaining your use case and we'll make this more ergonomic to deal with")
    assert _what_to_change(exc).startswith("The model returns its key/value cache: build it with use_cache=False")
    line = _first_line(exc)
    assert len(line) <= 302 and line.endswith("explaining your use …")  # whole words, and said to be cut


def test_an_apply_stopped_by_sigterm_is_stored_and_resumes(tmp_path, monkeypatch):
    """SIGTERM while a region's run goes on: exit 130, the apply and that run stored as stopped, the message naming
    the apply; --resume continues the run and ends the apply as if uninterrupted."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.helpers import REPO

    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    path, store = tmp_path / "fc_sort.py", tmp_path / "runs.db"
    path.write_text(MODEL)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "KERNELCRAFT_MODEL": ""}
    cmd = [sys.executable, "-m", "kernelcraft", "apply", str(path), "--device", DEVICE, "--rounds", "2",
           "--replace", "correct", "--no-compile-baseline", "--timing-budget", "0.3", "--min-share", "0", "--store",
           str(store), "--out", str(tmp_path / "out")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:  # until a region's run has judged a candidate
        if store.exists():
            s = Store(store)
            runs = s.runs(limit=5)
            judged = runs and s.results(runs[0].id)
            s.close()
            if judged:
                break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    s = Store(store)
    apply_id = s.applies()[0].id
    assert s.apply(apply_id).status == "stopped" and f"--resume {apply_id}" in err
    assert [r.status for r in s.runs(apply_id=apply_id)] == ["stopped"]
    s.close()
    outcome = api.apply(resume=apply_id, store=store)
    assert outcome.status == "done" and outcome.end_to_end.correct
    s = Store(store)
    assert [r.status for r in s.runs(apply_id=apply_id)] == ["done"]  # the stopped run went on, none new
    s.close()


def test_a_resumed_apply_keeps_its_profile_and_every_finished_run(tmp_path, monkeypatch):
    """A stopped apply resumed: its profile (the shares its plan followed) is the stored one, not measured again (on a
    busy machine a new profile put every region under --min-share and dropped four finished runs), and a region whose
    run finished keeps it even where what is left of the budget would start none."""
    import sqlite3

    import kernelcraft.apply.engine as engine

    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    first = _apply_file(tmp_path, "fc_sort.py", MODEL, replace="correct")
    ran = {r.name: r.run_id for r in first.regions if r.run_id}
    assert first.status == "done" and ran
    store = tmp_path / "runs.db"
    with sqlite3.connect(store) as db:  # stopped, and resumed with a budget that starts no run
        config = json.loads(db.execute("SELECT config FROM applies WHERE id = ?", (first.apply_id,)).fetchone()[0])
        config["apply"]["budget_minutes"] = 0.001
        db.execute("UPDATE applies SET status = 'stopped', config = ? WHERE id = ?",
                   (json.dumps(config), first.apply_id))

    def measured(*args, **kwargs):
        raise AssertionError("the resumed apply profiled the model again")
    monkeypatch.setattr(engine, "profile", measured)
    again = api.apply(resume=first.apply_id, store=store)
    assert again.status == "done" and again.profile == first.profile
    assert {r.name: r.run_id for r in again.regions if r.run_id} == ran
    assert [r.status for r in again.regions] == [r.status for r in first.regions]
    assert any(n.startswith("resumed: the stopped apply's profile is kept") for n in again.notes)
    s = Store(store)
    assert len(s.runs(apply_id=first.apply_id)) == len(set(ran.values()))  # none new
    s.close()


def _apply_file(tmp_path, name: str, text: str, **options):
    """Apply the model file `text` (written as tmp_path/name) with one candidate a region, quickly."""
    path = tmp_path / name
    path.write_text(text)
    options = {"compile_baseline": False, **options}
    return api.apply(path, rounds=1, device=DEVICE, store=tmp_path / "runs.db", out_dir=tmp_path / "out",
                     max_candidates=1, timing_budget=0.3, min_share=0.0, **options)


def test_the_budget_bounds_the_whole_apply(tmp_path, monkeypatch):
    """A budget spent by the capture, the profile and the model's baselines starts no region's run: the apply ends,
    the model as it was, each region saying why."""
    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    outcome = _apply_file(tmp_path, "fc_sort.py", MODEL, budget_minutes=0.02)
    assert outcome.status == "done" and outcome.replaced == [] and outcome.end_to_end is None
    ran_out = [r for r in outcome.regions if r.status == "skipped" and "budget ran out" in r.reason]
    assert ran_out and all(r.run_id is None for r in outcome.regions)
    assert outcome.times["final"] == "as it was"
    s = Store(tmp_path / "runs.db")
    assert s.runs(apply_id=outcome.apply_id) == []
    s.close()


MLP = MODEL.replace("self.fc = nn.Linear(features, classes)",
                    "self.fc = nn.Linear(features, classes)\n        self.out = nn.Linear(classes, classes)").replace(
    "return torch.sort(torch.relu(self.fc(x)), dim=1)[0]", "return torch.softmax(self.out(torch.relu(self.fc(x))), dim=1)")


def test_a_run_that_ends_early_leaves_its_time_to_the_regions_after_it(tmp_path, monkeypatch):
    """Two minutes, less the model's own measurements and the end-to-end reserve, fund one region's run at the
    start (each run takes at least a minute). That run ends after its one candidate, and what it left is split
    again: the regions after it get runs (before, they were skipped as out of budget, the time unused)."""
    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    outcome = _apply_file(tmp_path, "mlp.py", MLP, budget_minutes=2.0, replace="correct")
    ran = [r for r in outcome.regions if r.run_id]
    assert outcome.status == "done" and len(ran) >= 2, [(r.name, r.status, r.reason, r.minutes)
                                                        for r in outcome.regions]
    assert all(r.minutes and r.minutes <= 2.0 for r in ran)


MODEL_FORM = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(24, 8)

    def forward(self, x, mask):
        return self.head(torch.cumsum(x * mask, dim=1))


model = Net().eval()
example_inputs = [torch.randn(4, 16, 24), torch.rand(4, 16, 24) > 0.5]
'''


def test_a_model_file_in_the_model_and_inputs_form_is_reassembled_and_verified(tmp_path, monkeypatch):
    """The documented form (`model = Net().eval()`, example inputs): the masked running sum is one region, and the
    model with every region replaced passes end to end (its file's text goes through the static guards)."""
    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    outcome = _apply_file(tmp_path, "scorer.py", MODEL_FORM, replace="correct")
    regions = {r.name: r for r in outcome.regions}
    assert sorted(regions) == ["00_reduce_cumsum", "01_linear_linear"], sorted(regions)
    assert all(r.status == "replaced" for r in regions.values()), [(r.name, r.status, r.reason) for r in regions.values()]
    assert outcome.status == "done" and outcome.end_to_end.correct, outcome.end_to_end
    # the README's call, as a user makes it: their own module into kernelcraft.apply, in a fresh process with no
    # TRITON_INTERPRET set (without CUDA the kernels' Triton runs in its interpreter all the same)
    import os
    import subprocess
    import sys

    from tests.helpers import REPO

    script = f'''
import importlib.util, torch, kernelcraft
spec = importlib.util.spec_from_file_location("scorer", {str(tmp_path / "scorer.py")!r})
user = importlib.util.module_from_spec(spec)
spec.loader.exec_module(user)
model = user.model.to({DEVICE!r})
fast = kernelcraft.apply(model, {str(tmp_path / "out")!r})
inputs = [x.to({DEVICE!r}) for x in user.example_inputs]
with torch.no_grad():
    torch.testing.assert_close(fast(*inputs), model(*inputs), rtol=1e-4, atol=1e-4)
print(type(fast).__name__)
'''
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(REPO / "src")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ModelNew", done.stderr[-3000:]
    if not torch.cuda.is_available():  # triton imported first, its interpreter off: what to set, in one line
        early = subprocess.run([sys.executable, "-c", "import triton\n" + script], env=env, capture_output=True,
                               text=True, timeout=300)
        assert early.returncode == 1 and "Set TRITON_INTERPRET=1 in the environment" in early.stderr.splitlines()[-1]


def test_the_users_file_is_trusted_and_only_the_kernels_are_guarded(tmp_path, monkeypatch):
    """A model file that imports sys, seeds torch and calls setattr (each refused in a candidate's own code) is the
    user's, run as the reference runs it: its regions are replaced and the model passes end to end."""
    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    text = (MODEL_FORM.replace("import torch\n", "import sys\nimport torch\ntorch.manual_seed(0)\n", 1)
            .replace("        self.head = nn.Linear(24, 8)\n", "        setattr(self, 'head', nn.Linear(24, 8))\n"))
    outcome = _apply_file(tmp_path, "scorer.py", text, replace="correct")
    assert not any("static" in n for n in outcome.notes), outcome.notes
    assert outcome.status == "done" and outcome.end_to_end.correct, outcome.end_to_end
    assert {r.status for r in outcome.regions} == {"replaced"}, [(r.name, r.status, r.reason) for r in outcome.regions]
    assert "torch.manual_seed(0)" in (tmp_path / "out" / "model_new.py").read_text()  # carried, and run


BLOCKS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fcs = nn.ModuleList(nn.Linear(16, 16) for _ in range(3))

    def forward(self, x):
        for fc in self.fcs:
            x = torch.relu(fc(x))
        return x


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
'''


def test_a_problem_with_several_instances_runs_once_and_replaces_them_all(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    events = []
    outcome = _apply_file(tmp_path, "blocks.py", BLOCKS, replace="correct",
                          on_event=lambda kind, data: events.append((kind, data)))
    runs = [data for kind, data in events if kind == "apply_region"]
    assert len(runs) == 1 and runs[0]["instances"] == 3, runs
    first, *others = outcome.regions
    assert [r.status for r in outcome.regions] == ["replaced"] * 3 and not first.like
    assert all(r.like == first.name and r.run_id == first.run_id and r.source == first.source for r in others)
    assert outcome.end_to_end.correct and len(Store(tmp_path / "runs.db").runs(apply_id=outcome.apply_id)) == 1
    times = outcome.times
    assert times["final"] == "with kernels" and times["final_ms"] == outcome.end_to_end.runtime_ms, times
    assert times["eager_ms"] == outcome.end_to_end.eager_ms
    assert times["method"] == ("cpu_perf_counter" if DEVICE == "cpu" else "cuda_events+l2_flush")


def test_a_model_given_back_as_it_was_still_has_its_times(tmp_path, monkeypatch):
    """Nothing faster in the interpreter: no end-to-end verdict, and the model's own times by the verifier's method
    (its baselines), the final model the model as it was."""
    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    outcome = _apply_file(tmp_path, "blocks.py", BLOCKS)
    assert outcome.end_to_end is None and not outcome.replaced
    times = outcome.to_dict()["times"]
    assert times["final"] == "as it was" and times["final_ms"] == times["eager_ms"] > 0 and times["compile_ms"] is None


ATTENTION = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """GPT-2's attention as its modelling code writes it: heads by view and transpose, a causal mask sliced from a
    buffer, the heads' output made contiguous and viewed back. A branch on a size sends it to torch.export, which
    drops the contiguous (torch's attention lays its output out so that it is a no-op) and keeps the view, which
    then holds only for that layout."""

    def __init__(self):
        super().__init__()
        self.qkv, self.out = nn.Linear(32, 96), nn.Linear(32, 32)
        self.register_buffer("bias", torch.ones(16, 16, dtype=torch.bool).tril())

    def forward(self, x):
        b, t, c = x.shape
        if t > 16:
            raise ValueError("at most 16 positions")
        q, k, v = (h.view(b, t, 4, 8).transpose(1, 2) for h in self.qkv(x).split(32, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias[:t, :t])
        return self.out(y.transpose(1, 2).contiguous().view(b, t, c))


def get_inputs():
    return [torch.randn(2, 16, 32)]


def get_init_inputs():
    return []
'''


def test_attention_with_a_held_causal_mask_is_replaced_and_the_view_after_it_holds(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    outcome = _apply_file(tmp_path, "attention.py", ATTENTION, replace="correct")
    assert outcome.method == "export"
    attention = next(r for r in outcome.regions if r.kind == "attention")
    assert attention.status == "replaced", (attention.status, attention.reason)
    assert outcome.end_to_end.correct, outcome.end_to_end
    assert ".reshape(" in (tmp_path / "out" / "model_new.py").read_text()  # the view after the kernel, made a reshape


@pytest.mark.parametrize("kernels, compiled_kernels, compiled, keep, final", [
    (2.0, None, 1.5, False, "torch.compile"), (1.2, None, 1.5, False, "with kernels"),
    (2.0, None, None, False, "with kernels"), (2.0, 1.2, 1.5, False, "compiled with kernels"),
    (None, 3.5, 4.0, False, "as it was"),  # compiled with kernels beat torch.compile, not eager
    (None, 3.5, 4.0, True, "compiled with kernels"), (4.0, None, None, True, "with kernels")])
def test_the_final_model_is_the_fastest_of_eager_kernels_and_torch_compile(kernels, compiled_kernels, compiled, keep,
                                                                          final):
    forms = {k: v for k, v in (("with kernels", kernels), ("compiled with kernels", compiled_kernels)) if v}
    name, ms = final_of(3.0, compiled, forms, keep)
    assert name == final and ms == {"as it was": 3.0, "torch.compile": compiled, **forms}[name]


def test_a_host_bound_model_is_said_so_for_each_of_its_baselines():
    """BERT-base in bf16 at 32 x 128 tokens on an H200: 5.7 ms a call on the host, about 2 ms on the device."""
    from kernelcraft.result import Timing

    def timing(host, device):
        return Timing(host, 0.0, 0.0, 10, host, "cuda_events+l2_flush", host_ms=host, device_ms=device, lead_ms=0.5)
    notes = host_bound(timing(5.71, 2.1), timing(3.9, 3.6))
    assert len(notes) == 1 and notes[0].startswith("the model is host-bound eager: a call takes 5.71 ms on the "
                                                   "host and 2.1 ms on the device")
    assert len(host_bound(timing(5.71, 2.1), timing(6.0, 2.0))) == 2
    assert host_bound(timing(5.71, 2.1), timing(6.0, 2.0), compiled_timed=False)[0].startswith("the model is "
                                                                                               "host-bound eager")
    assert host_bound(None, Timing(1.0, 0.0, 0.0, 5, 1.0, "cpu_perf_counter")) == []  # the CPU: not measured


RMS_FP16 = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """An RMSNorm as transformers writes it, in float16: computed in float32, cast back before the weight."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(64, dtype=torch.float16) + 0.1 * torch.randn(64).half())

    def forward(self, x):
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h.to(x.dtype)


def get_inputs():
    return [torch.randn(4, 16, 64, dtype=torch.float16)]


def get_init_inputs():
    return []
'''


def test_an_rmsnorm_with_its_casts_is_one_region_the_engineer_covers(tmp_path, monkeypatch):
    """float16 in and out, its casts in the region: the built-in engineer's kernel verified alone and in the model."""
    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    outcome = _apply_file(tmp_path, "rms.py", RMS_FP16, replace="correct")
    assert [(r.kind, r.status) for r in outcome.regions] == [("reduce", "replaced")], outcome.to_dict()["regions"]
    assert outcome.end_to_end is not None and outcome.end_to_end.correct, outcome.end_to_end


def test_the_model_compiled_with_its_kernels_is_verified_and_given_back(tmp_path, capsys, monkeypatch):
    """With torch.compile timed: the model under torch.compile, each kernel a custom op, verified end to end beside
    the eager form and shown by `apply --show` and the HTML report; `kernelcraft.apply(model, DIR, use="compiled")`
    gives it back, one compiled graph around the kernels (no graph break), computing the model's forward on its own
    weights."""
    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    outcome = _apply_file(tmp_path, "blocks.py", BLOCKS, replace="correct", compile_baseline=True)
    assert outcome.end_to_end.correct, outcome.end_to_end
    form = outcome.compiled
    assert form is not None and form.regions == [r.name for r in outcome.regions], outcome.to_dict()["compiled"]
    assert form.verdict.correct and form.file == str(tmp_path / "out" / "model_new_compiled.py"), form.verdict
    times = outcome.times
    assert times["compiled_kernels_ms"] == form.verdict.runtime_ms > 0 and times["compile_ms"] > 0
    # replace="correct": the kernels were asked for, so the model as it was is no choice
    assert times["final_ms"] == min(times["kernels_ms"], times["compiled_kernels_ms"], times["compile_ms"])
    store, page = str(tmp_path / "runs.db"), tmp_path / "apply.html"
    capsys.readouterr()
    assert main(["apply", "--show", outcome.apply_id, "--store", store]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "compiled with its kernels" in shown and "× compile" in shown, shown[-2000:]
    assert main(["report", outcome.apply_id, "--store", store, "--html", str(page)]) == 0
    assert "model_new_compiled.py" in page.read_text() and "compiled with kernels" in page.read_text()
    from torch._dynamo.utils import counters
    counters.clear()
    ns = {}
    exec(compile(BLOCKS, "blocks", "exec"), ns)
    torch.manual_seed(3)
    model = ns["Model"]().eval().to(DEVICE)
    new = kernelcraft.apply(model, tmp_path / "out", use="compiled")
    x = torch.randn(8, 16, device=DEVICE)
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x), rtol=1e-4, atol=1e-4)
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"], dict(counters["graph_break"])


@pytest.mark.parametrize("eager_ms, compile_ms, speedups, hopeless", [
    (6.2, 4.2, {"attn": 1.08}, True),  # BERT bf16 on an H200: attention 13% of the time, 1.08x alone; compile 1.48x
    (6.2, 4.2, {"attn": 1.08, "mlp": 3.0}, False),  # enough of the model faster than torch.compile makes it
    (6.2, 7.0, {"attn": 1.08}, False)])  # torch.compile slower than eager: the eager form can win
def test_the_eager_form_is_not_verified_where_its_kernels_cannot_beat_torch_compile(eager_ms, compile_ms, speedups,
                                                                                   hopeless):
    shares = {"attn": 0.135, "mlp": 0.5, "rest": 0.365}
    why = cannot_beat_compile(eager_ms, compile_ms, shares, speedups)
    assert bool(why) == hopeless and (not why or "cannot beat torch.compile" in why), why
