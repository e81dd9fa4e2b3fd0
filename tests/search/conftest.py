"""Search runs end to end on the CPU: a real local chat server replays scripted answers, the real
verifier judges the kernels (Triton's interpreter), the real SQLite store keeps everything."""

from __future__ import annotations

import pytest

from kernelcraft.problems import load_problem
from kernelcraft.propose.llm import ClientSettings, LLMProposer, ModelSpec
from kernelcraft.store import Store
from kernelcraft.verify import TimingConfig, Verifier
from kernelcraft.verify.policy import get_policy
from tests.helpers import FIXTURES, close_shared, small_config
from tests.llm_server import Reply, Rule, ScriptedLLMServer

KERNELS = FIXTURES / "search"
FAST = (KERNELS / "relu_fast.py").read_text()
SLOW = (KERNELS / "relu_slow.py").read_text()
WRONG = (KERNELS / "relu_wrong.py").read_text()
PROSE = "I would vectorize the loads and fuse the tail, which should be fast."
IDEAS_PROMPT = r"Propose \d+ distinct optimization ideas"


def code(source: str, idea: str | None = None, category: str | None = None) -> str:
    head = f"Idea: {idea}\nCategory: {category}\n\n" if idea else "Here is the kernel.\n\n"
    return f"{head}```python\n{source}```\n"


def ideas_json(*pairs: tuple[str, str]) -> str:
    items = ", ".join(f'{{"idea": "{text}", "category": "{cat}"}}' for text, cat in pairs)
    return f"```json\n[{items}]\n```"


@pytest.fixture(scope="package")
def verifier(tmp_path_factory):
    config = small_config(tmp_path_factory.mktemp("cache"), static_guards=True, trials=2,
                          timing=TimingConfig(budget_s=0.2, min_samples=3))
    v = Verifier("cpu", config)
    yield v
    close_shared(v)


@pytest.fixture
def relu():
    return load_problem("level1/relu")


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "runs.db")
    yield s
    s.close()


@pytest.fixture
def serve():
    """serve(rules) -> a started ScriptedLLMServer, stopped after the test."""
    servers = []

    def start(rules: list[Rule], default: Reply | None = None) -> ScriptedLLMServer:
        servers.append(ScriptedLLMServer(rules, default=default).start())
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def proposer():
    """proposer(server, api="openai") -> an LLMProposer talking to the scripted server."""
    made = []

    def make(server: ScriptedLLMServer, api: str = "openai", **settings) -> LLMProposer:
        if api == "anthropic":
            spec = ModelSpec("anthropic", "anthropic", "claude-haiku-4-5", server.url, "test-key")
        else:
            spec = ModelSpec("openai-compatible", "openai", "scripted-model", server.url + "/v1", "test-key")
        settings.setdefault("backoff_s", 0.01)
        settings.setdefault("max_retries", 1)
        strict = get_policy("strict")
        made.append(LLMProposer(spec, "cpu", (strict.name, strict.summary), settings=ClientSettings(**settings)))
        return made[-1]

    yield make
    for p in made:
        p.close()
