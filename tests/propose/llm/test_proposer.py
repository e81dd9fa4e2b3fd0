"""What the chat-model proposer sends: prompts built from the text files, for every request kind."""

from __future__ import annotations

import pytest

from kernelcraft.backends import get_backend, names
from kernelcraft.problems import load_problem
from kernelcraft.propose.base import Idea, Kernel, Request, Turn
from kernelcraft.propose.llm import LLMProposer, ModelSpec
from kernelcraft.verify.policy import get_policy


@pytest.fixture
def proposer():
    relaxed = get_policy("relaxed")
    p = LLMProposer(ModelSpec("vllm", "openai", "m", "http://127.0.0.1:9/v1", "none"), "cpu",
                    (relaxed.name, relaxed.summary), precision=relaxed.allow_tf32)
    yield p
    p.close()


@pytest.fixture
def softmax():
    return load_problem("level1/softmax")


PARENT = Kernel("class ModelNew: pass  # the parent", "triton", "Status: ok\nRuntime: 1.0 ms", 1.5, "bigger blocks")


@pytest.mark.parametrize("backend", names(promptable=True))
def test_the_system_prompt_carries_the_backends_own_rules(proposer, softmax, backend):
    system = proposer.messages(Request("implement", softmax, backend, [PARENT], idea=Idea("x", "memory")))[0]["content"]
    assert get_backend(backend).prompt() in system


def test_ideas_prompt(proposer, softmax):
    msgs = proposer.messages(Request("ideas", softmax, "triton", [PARENT], count=3))
    assert [m["role"] for m in msgs] == ["system", "user"]
    system, user = msgs[0]["content"], msgs[1]["content"]
    assert "CPU only" in system and "@triton.jit" in system and "`relaxed` tolerance policy" in system
    assert softmax.source.strip() in user and "Propose 3 distinct optimization ideas" in user
    assert "class ModelNew: pass  # the parent" in user and "1.50x PyTorch eager" in user and "Runtime: 1.0 ms" in user
    for tag in ("memory", "async", "precision", "compute", "parallelism", "control"):
        assert tag in user
    assert "```json" in user


def test_implement_prompt_states_the_idea_and_the_format(proposer, softmax):
    request = Request("implement", softmax, "cuda_nvrtc", [PARENT], idea=Idea("use float4 loads", "memory"))
    user = proposer.messages(request)[1]["content"]
    assert "applies this idea: use float4 loads (category: memory access)" in user
    assert "kernel 1 above" in user and "exactly one ```python code block" in user
    assert "load_kernels(SOURCE)" in proposer.messages(request)[0]["content"]
    first = proposer.messages(Request("implement", softmax, "triton"))[1]["content"]
    assert "Write a custom kernel that computes the reference's result faster" in first and "Kernel 1" not in first


def test_evolve_asks_for_the_idea_and_shows_inspirations(proposer, softmax):
    other = Kernel("class ModelNew: pass  # other", "triton", "Status: ok", 1.1)
    user = proposer.messages(Request("implement", softmax, "triton", [PARENT], inspirations=[other],
                                     ask_idea=True))[1]["content"]
    assert "Other kernels you may borrow from" in user and "# other" in user
    assert "`Idea: …`" in user and "`Category: …`" in user


def test_fix_is_a_conversation_with_the_verifier(proposer, softmax):
    history = [Turn("answer one", "Status: incorrect (mismatch)"), Turn("answer two", "Status: ok\nRuntime: 2 ms")]
    msgs = proposer.messages(Request("fix", softmax, "triton", history=history))
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[2]["content"] == "answer one" and "Status: incorrect (mismatch)" in msgs[3]["content"]
    assert msgs[4]["content"] == "answer two" and "Runtime: 2 ms" in msgs[5]["content"]
    assert "Answer with the whole file again" in msgs[5]["content"]


def test_a_failed_endpoint_gives_an_answer_with_an_error_not_an_exception(softmax):
    strict = get_policy("strict")
    from kernelcraft.propose.llm import ClientSettings

    p = LLMProposer(ModelSpec("vllm", "openai", "m", "http://127.0.0.1:9/v1", "none"), "cpu",
                    (strict.name, strict.summary), ClientSettings(max_retries=0, timeout_s=2, backoff_s=0.01))
    answer = p.ask(Request("implement", softmax, "triton"))
    p.close()
    assert answer.text is None and answer.error and "scripted" not in answer.error
    assert answer.messages[0]["role"] == "system"


def test_strict_prompts_say_lower_precision_fails_and_offer_no_precision_ideas():
    from kernelcraft.problems import load_problem
    from kernelcraft.propose.llm.proposer import prompt_messages

    problem = load_problem("level1/softmax")
    ideas = Request("ideas", problem, "triton", count=3)
    strict = prompt_messages(ideas, "CPU only", "strict", "fp32 within 1e-4", precision=False, on_gpu=False)
    relaxed = prompt_messages(ideas, "H100", "relaxed", "1e-2", precision=True, on_gpu=True)
    assert "fail the check" in strict[0]["content"] and "keep fp32 math" in strict[0]["content"]
    assert "precision (" not in strict[1]["content"] and "memory (" in strict[1]["content"]
    assert "precision (" in relaxed[1]["content"] and "are admitted" in relaxed[0]["content"]
    assert strict[0]["content"].startswith("You are an expert kernel engineer (there is no GPU here")
    assert relaxed[0]["content"].startswith("You are an expert GPU kernel engineer.")


def test_a_fix_after_an_unusable_answer_asks_for_the_format_not_for_speed():
    from kernelcraft.problems import load_problem
    from kernelcraft.propose.base import Turn
    from kernelcraft.propose.llm.proposer import prompt_messages

    request = Request("fix", load_problem("level1/softmax"), "triton",
                      history=[Turn("no code here", "Your answer could not be used: no code block.", unusable=True),
                               Turn("```python\nclass ModelNew: ...\n```", "Status: incorrect (mismatch)")])
    messages = prompt_messages(request, "CPU only", "strict", "fp32 within 1e-4")
    assert "Answer again: the whole kernel file" in messages[3]["content"]
    assert "make it faster" not in messages[3]["content"] and "make it faster" in messages[5]["content"]


def test_the_target_states_sizes_baselines_and_the_roofline_floor():
    from kernelcraft import hardware
    from kernelcraft.problems.cost import Cost, TensorSpec
    from kernelcraft.propose.llm.proposer import prompt_messages
    from kernelcraft.result import Timing
    from kernelcraft.target import Target
    from kernelcraft.verify.target import floor

    import torch

    # softmax over (4096, 65536) fp32 on an H100: 2 GiB read and written, 3.35 TB/s datasheet peak
    cost = Cost(flops=5 * 4096 * 65536, bytes=2 * 4 * 4096 * 65536, matmul_flops=0, matmul_dtype=None,
                inputs=[TensorSpec((4096, 65536), torch.float32)])
    bound = floor(hardware.KNOWN["H100"], cost, allow_tf32=False)
    assert bound.bound == "memory" and bound.ms == pytest.approx(2 * 4 * 4096 * 65536 / 3.35e12 * 1e3, rel=1e-4)
    timing = lambda ms: Timing(ms, 0.01, 0.01, 50, ms, "cuda_events+l2_flush")  # noqa: E731
    target = Target("level1/softmax", "NVIDIA H100 80GB HBM3", "full sizes",
                    [{"shape": [4096, 65536], "dtype": "float32"}], timing(1.43), timing(1.10), bound, [])
    request = Request("ideas", load_problem("level1/softmax"), "triton", count=3, target=target)
    text = prompt_messages(request, "H100", "strict", "fp32 within 1e-4")[1]["content"]
    assert "What is timed: one forward call on inputs (4096, 65536) float32 (full sizes), on NVIDIA H100" in text
    assert "Baselines here: PyTorch eager 1.43 ms, torch.compile 1.1 ms." in text
    assert "Roofline floor: 0.641 ms (memory-bound: 2.147 GB moved at 3.35 TB/s" in text
    # a matmul's floor is its arithmetic: compute-bound at the fp32 rate under strict, tf32 where admitted
    mm = Cost(flops=2 * 8192 ** 3, bytes=3 * 4 * 8192 ** 2, matmul_flops=2 * 8192 ** 3, matmul_dtype="float32",
              inputs=[TensorSpec((8192, 8192), torch.float32)] * 2)
    assert floor(hardware.KNOWN["H100"], mm, allow_tf32=False).bound == "compute"
    assert floor(hardware.KNOWN["H100"], mm, allow_tf32=True).math == "tf32"
    assert floor(None, mm, allow_tf32=True) is None  # a CPU: no ceilings known, no floor claimed
    implement = Request("implement", load_problem("level1/softmax"), "triton", target=target,
                        failures=['idea "Tile it": compile_error (compile_failed): error: bad'])
    text = prompt_messages(implement, "H100", "strict", "fp32 within 1e-4")[1]["content"]
    assert "Roofline floor" in text and "Errors in the last round's kernels" in text and "Tile it" in text


def test_kernels_are_listed_fastest_first_and_the_task_names_the_one_to_build_on():
    from kernelcraft.propose.llm.proposer import prompt_messages

    fast = Kernel("class ModelNew: pass  # fast", "triton", "Status: ok", 2.0, "vector loads", runtime_ms=0.5)
    slow = Kernel("class ModelNew: pass  # slow", "triton", "Status: ok", 1.0, "bigger blocks", runtime_ms=1.0)
    request = Request("implement", load_problem("level1/softmax"), "triton", parents=[fast, slow], base=1,
                      idea=Idea("Unroll the row loop", "control"))
    text = prompt_messages(request, "H100", "strict", "fp32 within 1e-4")[1]["content"]
    assert text.index("# fast") < text.index("# slow")
    assert "### Kernel 1 (0.5 ms, 2.00x PyTorch eager); idea: vector loads" in text
    assert "Write a new version of kernel 2 above that applies this idea: Unroll the row loop" in text
    evolve = Request("implement", load_problem("level1/softmax"), "triton", parents=[fast], ask_idea=True)
    strict = prompt_messages(evolve, "H100", "strict", "fp32 within 1e-4", precision=False)[1]["content"]
    assert "precision" not in strict.split("`Category: …`")[1]
