"""The scripted LLM server, driven by the real `openai` and `anthropic` SDK clients (CPU only, a few seconds)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import anthropic
import httpx2
import openai
import pytest

from tests.llm_server import Reply, Rule, ScriptedLLMServer

pytestmark = pytest.mark.timeout(60)

LONG = "def kernel(x):\n    return x.clamp_min(0)  # a ReLU, long enough to stream in several chunks\n"


_clients: list = []


@pytest.fixture(autouse=True)
def close_clients():
    """Close every SDK client a test made, so no pooled socket is left for the garbage collector."""
    yield
    while _clients:
        _clients.pop().close()


def oai(server, **kw) -> openai.OpenAI:
    _clients.append(openai.OpenAI(base_url=server.url + "/v1", api_key="x", **kw))
    return _clients[-1]


def ant(server, **kw) -> anthropic.Anthropic:
    _clients.append(anthropic.Anthropic(base_url=server.url, api_key="x", **kw))
    return _clients[-1]


def user(text):
    return [{"role": "user", "content": text}]


def oai_ask(client, text, **kw):
    return client.chat.completions.create(model="gpt-test", messages=user(text), **kw)


def ant_ask(client, text, **kw):
    return client.messages.create(model="claude-test", max_tokens=64, messages=user(text), **kw)


def test_openai_non_streaming():
    with ScriptedLLMServer([Rule("relu", [Reply(LONG, input_tokens=11, output_tokens=22)])]) as server:
        response = oai_ask(oai(server), "write a relu")
    assert response.object == "chat.completion" and response.model == "gpt-test"
    assert response.choices[0].message.content == LONG
    assert response.choices[0].message.role == "assistant" and response.choices[0].finish_reason == "stop"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens, response.usage.total_tokens) == (11, 22, 33)
    assert server.requests[0]["api"] == "openai" and server.requests[0]["path"] == "/v1/chat/completions"


def test_openai_streaming_with_usage():
    with ScriptedLLMServer([Rule("relu", [Reply(LONG)])]) as server:
        chunks = list(oai_ask(oai(server), "write a relu", stream=True, stream_options={"include_usage": True}))
    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(deltas) == LONG and len(deltas) > 3
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == len(LONG) // 4
    assert chunks[-1].usage.prompt_tokens == max(1, len("write a relu") // 4)


def test_openai_streaming_without_usage_and_models_list():
    with ScriptedLLMServer([Rule(".", [Reply("hi there")])]) as server:
        client = oai(server)
        chunks = list(oai_ask(client, "x", stream=True))
        models = [m.id for m in client.models.list()]
    assert all(c.usage is None for c in chunks) and chunks[-1].choices[0].finish_reason == "stop"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "hi there"
    assert models == ["scripted-model", "gpt-test"]


def test_anthropic_create():
    with ScriptedLLMServer([Rule("relu", [Reply(LONG, input_tokens=5, output_tokens=7)])]) as server:
        message = ant_ask(ant(server), "write a relu")
    assert message.type == "message" and message.role == "assistant" and message.model == "claude-test"
    assert [b.type for b in message.content] == ["text"] and message.content[0].text == LONG
    assert message.stop_reason == "end_turn" and message.stop_sequence is None
    assert (message.usage.input_tokens, message.usage.output_tokens) == (5, 7)
    assert server.requests[0]["api"] == "anthropic" and server.requests[0]["path"] == "/v1/messages"


def test_anthropic_stream():
    with ScriptedLLMServer([Rule("relu", [Reply(LONG, input_tokens=5, output_tokens=7)])]) as server:
        client = ant(server)
        with client.messages.stream(model="claude-test", max_tokens=64, messages=user("relu")) as stream:
            pieces = list(stream.text_stream)
            final = stream.get_final_message()
        events = [e.type for e in ant_ask(client, "relu", stream=True)]
    assert "".join(pieces) == LONG and len(pieces) > 3
    assert final.content[0].text == LONG and final.stop_reason == "end_turn"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (5, 7)
    assert events[:2] == ["message_start", "content_block_start"]  # the ping is skipped by the SDK
    assert events[-3:] == ["content_block_stop", "message_delta", "message_stop"]


def test_rule_order_consumption_and_system():
    rules = [
        Rule("alpha", [Reply("sys-answer")], system="kernel expert"),
        Rule("alpha", [Reply("first"), Reply("second")]),
        Rule("alpha|beta", [Reply("never for alpha")]),
    ]
    with ScriptedLLMServer(rules) as server:
        client = oai(server)
        answers = [oai_ask(client, "alpha").choices[0].message.content for _ in range(3)]
        with_system = client.chat.completions.create(model="m", messages=[
            {"role": "system", "content": "You are a kernel expert."}, *user("alpha")])
        # the LAST user message decides, and a list of content parts is joined
        parts = client.chat.completions.create(model="m", messages=[
            *user("alpha"), {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "now"}, {"type": "text", "text": "beta"}]}])
        anth = ant(server).messages.create(model="m", max_tokens=8, system=[{"type": "text", "text": "kernel expert"}],
                                            messages=user("alpha"))
    assert answers == ["first", "second", "second"]
    assert with_system.choices[0].message.content == "sys-answer"
    assert parts.choices[0].message.content == "never for alpha"
    assert anth.content[0].text == "sys-answer"
    assert [r["matched"] for r in server.requests] == [1, 1, 1, 0, 2, 0]


def test_429_then_success_is_retried_by_both_sdks():
    script = [Reply(status=429, retry_after_ms=10), Reply("ok")]
    with ScriptedLLMServer([Rule("a", list(script)), Rule("b", list(script))]) as server:
        assert oai_ask(oai(server, max_retries=2), "a").choices[0].message.content == "ok"
        assert ant_ask(ant(server, max_retries=2), "b").content[0].text == "ok"
    assert [r["matched"] for r in server.requests] == [0, 0, 1, 1]


def test_error_headers_and_500_without_retries():
    with ScriptedLLMServer([Rule(".", [Reply(status=500, text="boom", retry_after_ms=1500)])]) as server:
        with pytest.raises(openai.InternalServerError) as oe:
            oai_ask(oai(server, max_retries=0), "x")
        with pytest.raises(anthropic.InternalServerError) as ae:
            ant_ask(ant(server, max_retries=0), "x")
    assert oe.value.status_code == 500 and oe.value.body["message"] == "boom"
    assert ae.value.body == {"type": "error", "error": {"type": "api_error", "message": "boom"}}
    assert oe.value.response.headers["retry-after-ms"] == "1500" and oe.value.response.headers["retry-after"] == "1.5"
    assert len(server.requests) == 2


def test_delay():
    with ScriptedLLMServer([Rule(".", [Reply("slow", delay_s=0.3)])]) as server:
        client = oai(server)
        start = time.monotonic()
        assert oai_ask(client, "x").choices[0].message.content == "slow"
        assert time.monotonic() - start >= 0.3


def test_cut_off_openai_stream_raises_connection_error_without_finish_reason():
    with ScriptedLLMServer([Rule(".", [Reply(LONG, cut_after=20)])]) as server:
        seen, finishes = [], []
        with pytest.raises(openai.APIConnectionError) as err:
            for chunk in oai_ask(oai(server, max_retries=2), "x", stream=True, stream_options={"include_usage": True}):
                seen.append(chunk.choices[0].delta.content or "")
                finishes.append(chunk.choices[0].finish_reason)
    # every delta up to the cut arrives first; the SDK never retries a stream that has started
    assert "".join(seen) == LONG[:20] and finishes == [None] * len(finishes)
    assert isinstance(err.value.__cause__, httpx2.RemoteProtocolError) and len(server.requests) == 1


def test_cut_off_anthropic_stream_raises_raw_httpx2_error():
    with ScriptedLLMServer([Rule(".", [Reply(LONG, cut_after=20)])]) as server:
        client = ant(server, max_retries=2)
        pieces = []
        with pytest.raises(httpx2.RemoteProtocolError, match="incomplete chunked read"):
            with client.messages.stream(model="m", max_tokens=64, messages=user("x")) as stream:
                for text in stream.text_stream:
                    pieces.append(text)
        assert "".join(pieces) == LONG[:20]
        with pytest.raises(httpx2.RemoteProtocolError):  # not wrapped in anthropic.APIConnectionError
            with client.messages.stream(model="m", max_tokens=64, messages=user("x")) as stream:
                stream.get_final_message()
    assert len(server.requests) == 2


def test_cut_off_non_streaming_is_a_connection_error():
    with ScriptedLLMServer([Rule(".", [Reply(LONG, cut_after=5)])]) as server:
        with pytest.raises(openai.APIConnectionError):
            oai_ask(oai(server, max_retries=0), "x")
        with pytest.raises(anthropic.APIConnectionError):
            ant_ask(ant(server, max_retries=0), "x")
        # both SDKs retry it like any connection error: 1 + 1 more request here
        with pytest.raises(openai.APIConnectionError):
            oai_ask(oai(server, max_retries=1), "x")
    assert len(server.requests) == 4


def test_no_match_is_a_readable_400_and_default_answers():
    prompt = "please write a softmax " + "z" * 300
    with ScriptedLLMServer([Rule("relu", [Reply("r")])]) as server:
        with pytest.raises(openai.BadRequestError, match="no scripted rule matches prompt: 'please write a softmax"):
            oai_ask(oai(server), prompt)
        with pytest.raises(anthropic.BadRequestError, match="softmax"):
            ant_ask(ant(server), prompt)
        assert server.requests[0]["matched"] is None
    with ScriptedLLMServer([Rule("relu", [Reply("r")])], default=Reply("fallback")) as server:
        assert oai_ask(oai(server), prompt).choices[0].message.content == "fallback"


def test_add_and_concurrent_consumption():
    with ScriptedLLMServer([]) as server:
        server.add(Rule("n", [Reply(str(i)) for i in range(16)] + [Reply("extra")]))
        client = oai(server)
        answers, threads = [], []
        for _ in range(16):
            threads.append(threading.Thread(target=lambda: answers.append(oai_ask(client, "n").choices[0].message.content)))
            threads[-1].start()
        for t in threads:
            t.join()
        assert sorted(answers, key=int) == [str(i) for i in range(16)]
        assert oai_ask(client, "n").choices[0].message.content == "extra"


def write_script(tmp_path) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({
        "rules": [{"match": "relu", "system": None, "replies": [{"text": "from json", "output_tokens": 3}]}],
        "default": {"text": "json default"},
    }))
    return path


def test_from_json(tmp_path):
    with ScriptedLLMServer.from_json(write_script(tmp_path)) as server:
        assert ant_ask(ant(server), "relu").content[0].text == "from json"
        assert ant_ask(ant(server), "other").usage.output_tokens == len("json default") // 4


def test_main_serves_a_json_script(tmp_path):
    script = Path(__file__).with_name("llm_server.py")
    proc = subprocess.Popen([sys.executable, str(script), str(write_script(tmp_path))],
                            stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        with openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0) as client:
            assert oai_ask(client, "relu").choices[0].message.content == "from json"
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stdout.close()
