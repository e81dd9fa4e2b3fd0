"""A proposer backed by a chat model: requests become prompts (text files in prompts/), answers come
back as text. Failed calls are answers with an error; only a fatal endpoint error raises."""

from __future__ import annotations

import time
from functools import cache
from pathlib import Path
from string import Template

from kernelcraft.backends import get_backend
from kernelcraft.hardware import describe_device
from kernelcraft.propose.base import CATEGORIES, Answer, Kernel, Request, TriedIdea, Turn, Usage
from kernelcraft.metrics import times
from kernelcraft.problems import Problem
from kernelcraft.propose.llm.client import ChatClient, ClientSettings, FatalLLMError, LLMError
from kernelcraft.propose.llm.providers import ModelSpec, PriceTable
from kernelcraft.target import Target

PROMPTS = Path(__file__).parent / "prompts"


@cache
def template(name: str) -> Template:
    return Template((PROMPTS / f"{name}.txt").read_text())


class LLMProposer:
    def __init__(self, spec: ModelSpec, device: str, policy: tuple[str, str],
                 settings: ClientSettings | None = None, prices: PriceTable | None = None, precision: bool = False):
        """`policy`: the tolerance policy's name and its one-line summary, as the prompt states them;
        `precision`: whether it admits lower-precision math (TF32, fp16/bf16) on fp32 data."""
        self.spec = spec
        self.name = spec.label
        self.client = ChatClient(spec, settings)
        self.prices = prices or PriceTable()
        self.device_text = describe_device(device)
        self.policy_name, self.policy_summary = policy
        self.precision = precision
        self.on_gpu = device.startswith("cuda")

    def coverage(self, problem: Problem, backend: str) -> None:
        """A model is asked whatever the problem: it cannot tell ahead what it will write."""
        return None

    def close(self) -> None:
        self.client.close()

    def ask(self, request: Request) -> Answer:
        messages = self.messages(request)
        start = time.monotonic()
        try:
            done = self.client.complete(messages)
        except FatalLLMError:
            raise
        except LLMError as exc:
            return Answer(messages, None, error=str(exc), attempts=self.client.settings.max_retries + 1,
                          seconds=time.monotonic() - start)
        cost = self.prices.cost(self.spec.model, done.input_tokens, done.output_tokens)
        return Answer(messages, done.text, Usage(done.input_tokens, done.output_tokens, cost),
                      attempts=done.attempts, seconds=time.monotonic() - start, finish=done.finish,
                      output_limit=(done.max_tokens or done.output_tokens) if done.cut_off else None)

    # prompts ----------------------------------------------------------------------------------------
    def messages(self, request: Request) -> list[dict]:
        return prompt_messages(request, self.device_text, self.policy_name, self.policy_summary, self.precision,
                               self.on_gpu)


def prompt_messages(request: Request, device_text: str, policy_name: str, policy_summary: str,
                    precision: bool = False, on_gpu: bool = True) -> list[dict]:
    """The conversation a request becomes: system prompt (device, backend rules, policy), then the task.
    `precision`: the policy admits TF32/fp16 math on fp32 data; where it does not, the prompt says so and
    the precision category is not offered."""
    system = template("system").substitute(
        role="an expert GPU kernel engineer" if on_gpu else
        "an expert kernel engineer (there is no GPU here: your kernels run on the CPU)",
        device=device_text, backend_rules=get_backend(request.backend).prompt(),
        policy=policy_name, policy_summary=policy_summary, precision_rule=_precision_rule(policy_name, precision))
    messages = [{"role": "system", "content": system}]
    if request.kind == "ideas":
        target = ("a first custom kernel for it" if not request.parents else "the kernel above" if len(request.parents) == 1
                  else "the kernels above: the first idea is applied to kernel 1, the second to kernel 2, and so on in "
                       "turn, so make each idea suit the kernel it goes to")
        messages.append({"role": "user", "content": template("ideas").substitute(
            problem_source=request.problem.source.strip(), target_text=_target(request.target, on_gpu),
            kernels=_kernels(request.parents), count=request.count, target=target,
            categories=_category_list(precision), tried=_tried(request.tried), failures=_failures(request.failures))})
        return messages
    messages.append({"role": "user", "content": template("implement").substitute(
        problem_source=request.problem.source.strip(), target_text=_target(request.target, on_gpu),
        kernels=_kernels(request.parents), inspirations=_kernels(request.inspirations, "Other kernels you may borrow from"),
        failures=_failures(request.failures), task=_task(request, precision), output_format=template("output_format").template.strip())})
    for turn in request.history:  # fix: the conversation so far, the verifier speaking as the user
        messages.append({"role": "assistant", "content": turn.answer})
        messages.append({"role": "user", "content": fix_message(turn)})
    return messages


def fix_message(turn: Turn) -> str:
    """The user message that answers one turn of a multi-turn conversation: the verifier's feedback on the
    answer and what to do next (what `refine` sends, and what the RL environment observes)."""
    task = ("Answer again: the whole kernel file, in the format below." if turn.unusable else
            "Fix what the verifier found; if the kernel was correct, make it faster.")
    return template("fix").substitute(feedback=turn.feedback, task=task,
                                      output_format=template("output_format").template.strip())


def _tried(ideas: list[TriedIdea]) -> str:
    if not ideas:
        return ""
    lines = [f"- [{i.category}] {i.text} -> {i.outcome}" for i in ideas]
    return "\nIdeas already tried in this run, and what they led to (propose different ones):\n" + "\n".join(lines) + "\n"


def _failures(lines: list[str]) -> str:
    if not lines:
        return ""
    return "\nErrors in the last round's kernels (don't repeat them):\n" + "\n".join(f"- {l}" for l in lines) + "\n"


def _target(target: Target | None, on_gpu: bool = True) -> str:
    """What is timed, against what, and how low it can go: "timed on inputs (4096, 65536) float32 (full
    sizes); PyTorch eager 1.43 ms, torch.compile 1.10 ms; roofline floor 0.72 ms (memory-bound) …"."""
    if target is None:
        return ""
    shapes = ", ".join(f"({', '.join(map(str, i['shape']))}) {i['dtype']}" for i in target.inputs) or "no tensors"
    sizes = target.sizes + ("; on the CPU the small sizes are timed" if not on_gpu and target.sizes != "full sizes" else "")
    lines = [f"What is timed: one forward call on inputs {shapes} ({sizes}), on {target.device}."]
    base = [f"PyTorch eager {target.eager.cost_ms:.4g} ms"] if target.eager else []
    base += [f"torch.compile {target.compiled.cost_ms:.4g} ms"] if target.compiled else []
    if base:
        lines.append("Baselines here: " + ", ".join(base) + ".")
    f = target.floor
    if f is not None:
        work = (f"{f.flops / 1e9:.4g} GFLOP at {f.rate / 1e12:.4g} TFLOP/s {f.math}" if f.bound == "compute" else
                f"{f.bytes / 1e9:.4g} GB moved at {f.rate / 1e12:.4g} TB/s")
        lines.append(f"Roofline floor: {f.ms:.4g} ms ({f.bound}-bound: {work}, the device's datasheet peak); "
                     "no kernel can be faster.")
    return "\n" + "\n".join(lines) + "\n"


def _category_list(precision: bool = True) -> str:
    """The categories an idea may take; the precision one only where the policy admits lower precision."""
    return ", ".join(f"{tag} ({words})" for tag, words in CATEGORIES.items() if precision or tag != "precision")


def _precision_rule(policy: str, precision: bool) -> str:
    if precision:
        return (f"- Under `{policy}`, TF32 tensor cores and fp16/bf16 math on fp32 data are admitted where the "
                "error stays within the tolerance.")
    return (f"- Under `{policy}`, TF32 tensor cores or fp16/bf16 math on fp32 data fail the check (about 1e-3 off): "
            "keep fp32 math for fp32 data; the device's TF32 and fp16 rates are for 16-bit inputs only.")


def _kernels(kernels: list[Kernel], title: str = "The best kernels so far, fastest first, with the verifier's verdict") -> str:
    if not kernels:
        return ""
    out = [f"\n{title}:\n"]
    for i, k in enumerate(kernels, 1):
        speed = [f"{k.runtime_ms:.4g} ms"] if k.runtime_ms else []
        speed += [f"{times(k.speedup_eager)} PyTorch eager"] if k.speedup_eager else []
        head = f"### Kernel {i}" + (f" ({', '.join(speed)})" if speed else "") + (f"; idea: {k.idea}" if k.idea else "")
        out.append(f"{head}\n```python\n{k.source.strip()}\n```\nVerifier:\n{k.feedback.strip()}\n")
    return "\n".join(out)


def _task(request: Request, precision: bool = True) -> str:
    base = f"kernel {request.base + 1} above" if request.parents else "the reference"
    if request.idea:
        task = (f"Write a new version of {base} that applies this idea: {request.idea.text} "
                f"(category: {CATEGORIES.get(request.idea.category, request.idea.category)}).")
    elif request.parents:
        task = f"Write a faster version of {base}, still correct."
    else:
        task = "Write a custom kernel that computes the reference's result faster than PyTorch does."
    if request.ask_idea:
        task += (" Begin your answer with a line `Idea: …` naming the one optimization you apply and a line "
                 f"`Category: …` naming its category (one of: "
                 f"{', '.join(c for c in CATEGORIES if precision or c != 'precision')}).")
    return task
