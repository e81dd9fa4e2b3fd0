"""propose/llm/client.py: ChatClient over real HTTP, against the scripted local server (tests/llm_server.py)."""

from __future__ import annotations

import threading
import time

import pytest

from kernelcraft.propose.llm import client as client_module
from kernelcraft.propose.llm.client import (ANTHROPIC_THINKING, DEFAULT_MAX_TOKENS, ChatClient, ClientSettings,
                                            Completion, FatalLLMError, LLMError)
from kernelcraft.propose.llm.providers import ModelSpec
from tests.llm_server import Reply, Rule, ScriptedLLMServer

pytestmark = pytest.mark.timeout(60)

APIS = ["openai", "anthropic"]
LONG = "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.clamp_min(0)  # long enough\n"
USER = [{"role": "user", "content": "write a relu kernel"}]


@pytest.fixture(autouse=True)
def fresh_slots(monkeypatch):
    """provider_slots caches one semaphore per endpoint; a port reused by a later server must not inherit one."""
    monkeypatch.setattr(client_module, "_SLOTS", {})


_clients: list[ChatClient] = []


@pytest.fixture(autouse=True)
def close_clients():
    yield
    while _clients:
        _clients.pop().close()


def spec(server: ScriptedLLMServer, api: str) -> ModelSpec:
    if api == "openai":
        return ModelSpec("openai", "openai", "gpt-test", server.url + "/v1", "test-key")
    return ModelSpec("anthropic", "anthropic", "claude-test", server.url, "test-key")


def make(server, api, **settings) -> ChatClient:
    settings.setdefault("backoff_s", 0.01)
    settings.setdefault("timeout_s", 10.0)
    _clients.append(ChatClient(spec(server, api), ClientSettings(**settings)))
    return _clients[-1]


# answers ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("api", APIS)
def test_plain_answer_with_usage(api):
    with ScriptedLLMServer([Rule("relu", [Reply(LONG, input_tokens=123, output_tokens=45)])]) as server:
        done = make(server, api).complete(USER)
    assert isinstance(done, Completion)
    assert done.text == LONG
    assert (done.input_tokens, done.output_tokens) == (123, 45)
    assert done.usage_estimated is False
    assert done.attempts == 1
    assert done.finish == ("stop" if api == "openai" else "end_turn")
    assert len(server.requests) == 1
    body = server.requests[0]["body"]
    assert body["stream"] is True
    assert body["model"] == ("gpt-test" if api == "openai" else "claude-test")
    assert body["messages"] == USER
    if api == "openai":
        assert body["stream_options"] == {"include_usage": True}
        assert "reasoning_effort" not in body and "max_completion_tokens" not in body
    else:
        assert body["max_tokens"] == DEFAULT_MAX_TOKENS and "thinking" not in body and "system" not in body


def test_openai_settings_pass_through():
    with ScriptedLLMServer([Rule(".", [Reply("ok")])]) as server:
        done = make(server, "openai", reasoning_effort="high", max_tokens=5000, temperature=0.2).complete(USER)
    assert done.text == "ok"
    body = server.requests[0]["body"]
    assert body["reasoning_effort"] == "high"
    assert body["max_completion_tokens"] == 5000
    assert body["temperature"] == 0.2


@pytest.mark.parametrize("effort", ["low", "medium", "high"])
def test_anthropic_reasoning_effort_becomes_thinking(effort):
    with ScriptedLLMServer([Rule(".", [Reply("ok")])]) as server:
        done = make(server, "anthropic", reasoning_effort=effort, temperature=0.7).complete(USER)
    assert done.text == "ok"
    body = server.requests[0]["body"]
    budget = ANTHROPIC_THINKING[effort]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] > budget  # Anthropic rejects max_tokens <= budget_tokens
    assert body["max_tokens"] == budget + DEFAULT_MAX_TOKENS
    assert "temperature" not in body  # not allowed with thinking


def test_anthropic_without_effort_sends_temperature_and_max_tokens():
    with ScriptedLLMServer([Rule(".", [Reply("ok")])]) as server:
        make(server, "anthropic", temperature=0.3, max_tokens=1234, max_retries=0).complete(USER)
    body = server.requests[0]["body"]
    assert body["temperature"] == 0.3 and body["max_tokens"] == 1234 and "thinking" not in body


def test_anthropic_system_messages_go_to_the_system_field():
    messages = [{"role": "system", "content": "You are a kernel expert."},
                {"role": "system", "content": "Answer in Python."},
                {"role": "user", "content": "relu please"},
                {"role": "assistant", "content": "draft"},
                {"role": "user", "content": "faster please"}]
    # the rule's system regex proves the server saw the system prompt where Anthropic expects it
    with ScriptedLLMServer([Rule("faster", [Reply("sys-ok")], system="kernel expert")]) as server:
        done = make(server, "anthropic").complete(messages)
    assert done.text == "sys-ok"
    body = server.requests[0]["body"]
    assert body["system"] == "You are a kernel expert.\n\nAnswer in Python."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert server.requests[0]["matched"] == 0


def test_openai_system_message_stays_in_messages():
    messages = [{"role": "system", "content": "You are a kernel expert."}, *USER]
    with ScriptedLLMServer([Rule("relu", [Reply("sys-ok")], system="kernel expert")]) as server:
        assert make(server, "openai").complete(messages).text == "sys-ok"
    assert server.requests[0]["body"]["messages"] == messages


# retries and errors -----------------------------------------------------------------------------------

@pytest.mark.parametrize("api", APIS)
def test_429_then_success(api):
    with ScriptedLLMServer([Rule(".", [Reply(status=429, retry_after_ms=10), Reply("after the wait")])]) as server:
        done = make(server, api, max_retries=2).complete(USER)
    assert done.text == "after the wait"
    assert len(server.requests) == 2  # retried by the SDK, honouring retry-after-ms


@pytest.mark.parametrize("api", APIS)
def test_500_forever_is_a_plain_llm_error(api):
    with ScriptedLLMServer([Rule(".", [Reply(status=500, text="boom", retry_after_ms=10)])]) as server:
        with pytest.raises(LLMError) as err:
            make(server, api, max_retries=1).complete(USER)
    assert not isinstance(err.value, FatalLLMError)
    assert str(err.value).endswith(": HTTP 500: boom (after 1 retry)") and err.value.status == 500
    assert len(server.requests) == 2  # one try and one retry


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("status", [401, 404])
def test_auth_and_not_found_are_fatal_at_once(api, status):
    with ScriptedLLMServer([Rule(".", [Reply(status=status, text="nope")])]) as server:
        with pytest.raises(FatalLLMError) as err:
            make(server, api, max_retries=3).complete(USER)
    label = "openai/gpt-test" if api == "openai" else "anthropic/claude-test"
    # one line: the model, the status and the provider's own message, dug out of either SDK's error body
    assert str(err.value) == f"{label}: HTTP {status}: nope"
    assert (err.value.model, err.value.status, err.value.detail) == (label, status, f"HTTP {status}: nope")
    assert len(server.requests) == 1


@pytest.mark.parametrize("body, message", [
    ({"message": "Incorrect API key provided", "type": "invalid_request_error"}, "Incorrect API key provided"),
    ({"type": "error", "error": {"type": "not_found_error", "message": "model: x"}}, "model: x"),
    ({"error": "model 'x' not found, try pulling it first"}, "model 'x' not found, try pulling it first"),
    ({"object": "error", "message": "The model `x` does not exist.", "code": 404}, "The model `x` does not exist."),
    ({"detail": "Not Found"}, "Not Found"),
    ("upstream connect error", "upstream connect error"),
    ({"unexpected": 1}, None),
    (None, None),
])
def test_the_provider_message_is_found_in_every_body_shape(body, message):
    assert client_module._provider_message(body) == message


@pytest.mark.parametrize("api", APIS)
def test_bad_request_is_fatal(api):
    with ScriptedLLMServer([Rule("nothing-matches-this", [Reply("x")])]) as server:  # unmatched: 400
        with pytest.raises(FatalLLMError, match="400"):
            make(server, api, max_retries=3).complete(USER)
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS)
def test_cut_off_stream_is_asked_again(api):
    with ScriptedLLMServer([Rule(".", [Reply(LONG, cut_after=20), Reply(LONG, output_tokens=9)])]) as server:
        done = make(server, api, max_retries=2).complete(USER)
    assert done.text == LONG
    assert done.output_tokens == 9
    assert done.attempts == 2
    assert len(server.requests) == 2


@pytest.mark.parametrize("api", APIS)
def test_cut_off_forever_gives_up_after_max_retries(api):
    with ScriptedLLMServer([Rule(".", [Reply(LONG, cut_after=20)])]) as server:
        with pytest.raises(LLMError) as err:
            make(server, api, max_retries=2).complete(USER)
    assert not isinstance(err.value, FatalLLMError)
    assert "after 3 attempts" in str(err.value)
    assert len(server.requests) == 3  # max_retries + 1


@pytest.mark.parametrize("api", APIS)
def test_slow_answer_times_out(api):
    with ScriptedLLMServer([Rule(".", [Reply("too late", delay_s=3.0)])]) as server:
        start = time.monotonic()
        with pytest.raises(LLMError) as err:
            make(server, api, timeout_s=0.5, max_retries=0).complete(USER)
        elapsed = time.monotonic() - start
    assert not isinstance(err.value, FatalLLMError)
    assert 0.4 < elapsed < 2.5
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS)
def test_an_answer_cut_by_the_output_limit_says_so(api):
    with ScriptedLLMServer([Rule(".", [Reply(LONG, finish="length", output_tokens=64)])]) as server:
        cut = make(server, api, max_tokens=64).complete(USER)
    assert cut.finish == ("length" if api == "openai" else "max_tokens") and cut.cut_off
    assert cut.max_tokens == 64 and cut.text == LONG
    with ScriptedLLMServer([Rule(".", [Reply(LONG)])]) as server:
        whole = make(server, api).complete(USER)
    assert not whole.cut_off
    assert whole.max_tokens == (None if api == "openai" else DEFAULT_MAX_TOKENS)  # the limit the request set


# concurrency ------------------------------------------------------------------------------------------

WARM = [{"role": "user", "content": "warm up"}]
SLOW_RULES = [Rule("warm up", [Reply("warm")]), Rule("relu", [Reply("slow", delay_s=0.3)])]


def run_parallel(client: ChatClient, n: int) -> tuple[float, list]:
    """n calls from n threads at once; the SDK's first-call import and connection costs are paid before."""
    assert client.complete(WARM).text == "warm"
    results, errors = [], []

    def one():
        try:
            results.append(client.complete(USER).text)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(n)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return time.monotonic() - start, results


@pytest.mark.parametrize("api", APIS)
def test_concurrency_limit_queues_calls(api):
    with ScriptedLLMServer(SLOW_RULES) as server:
        elapsed, results = run_parallel(make(server, api, concurrency=2), 4)
    assert results == ["slow"] * 4
    assert elapsed >= 0.55
    times = sorted(r["time"] for r in server.requests if r["matched"] == 1)
    assert times[2] - times[0] >= 0.25  # the third call waited for a slot


@pytest.mark.parametrize("api", APIS)
def test_enough_slots_run_calls_together(api):
    with ScriptedLLMServer(SLOW_RULES) as server:
        elapsed, results = run_parallel(make(server, api, concurrency=4), 4)
    assert results == ["slow"] * 4
    assert elapsed < 0.55


def test_clients_of_one_endpoint_share_its_slots():
    with ScriptedLLMServer(SLOW_RULES) as server:
        a = make(server, "openai", concurrency=1)
        b = make(server, "openai", concurrency=1)
        assert a.slots is b.slots
        assert a.complete(WARM).text == "warm" and b.complete(WARM).text == "warm"
        results, start = [], time.monotonic()
        threads = [threading.Thread(target=lambda c=c: results.append(c.complete(USER).text)) for c in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
    assert results == ["slow", "slow"] and elapsed >= 0.55
