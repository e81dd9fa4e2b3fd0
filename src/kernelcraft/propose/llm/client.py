"""One chat completion, over a real HTTP API: OpenAI-compatible (through the `openai` SDK) or
Anthropic (through its own SDK), streamed so that long reasoning answers do not hit idle timeouts.

The SDKs retry 429s, 5xx and refused connections themselves (with backoff, honouring retry-after);
on top of that a stream that breaks off mid-answer is asked again here. Errors that another try
cannot mend (bad key, unknown model, malformed request) raise FatalLLMError at once: a run stops on
them instead of spending its budget on failures.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

import anthropic
import openai

from kernelcraft.propose.base import CUT_OFF, FatalProposerError
from kernelcraft.propose.llm.providers import ModelSpec

# Thinking budgets for Anthropic models, by the OpenAI-style effort name.
ANTHROPIC_THINKING = {"low": 4_000, "medium": 16_000, "high": 32_000}
DEFAULT_MAX_TOKENS = 16_000

_SLOTS: dict[tuple, threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


def provider_slots(spec: ModelSpec, concurrency: int) -> threading.BoundedSemaphore:
    """One limit on calls in flight per endpoint, shared by every client of it in this process."""
    key = (spec.api, spec.base_url, spec.provider)
    with _SLOTS_LOCK:
        if key not in _SLOTS:
            _SLOTS[key] = threading.BoundedSemaphore(concurrency)
        return _SLOTS[key]


class LLMError(RuntimeError):
    """A call that failed after its retries; the run goes on without its answer. The message is one line:
    the model, the HTTP status (or the error's kind) and the provider's own words."""

    def __init__(self, model: str, detail: str, status: int | None = None):
        super().__init__(f"{model}: {detail}")
        self.model, self.detail, self.status = model, detail, status


class FatalLLMError(LLMError, FatalProposerError):
    """A call no retry can mend (authentication, unknown model, rejected request)."""


class BrokenStream(Exception):
    """The answer's stream ended before the model said it was done."""


@dataclass
class Completion:
    text: str
    input_tokens: int
    output_tokens: int
    finish: str  # the provider's reason: stop / end_turn / length / max_tokens …
    attempts: int
    usage_estimated: bool = False  # the endpoint sent no usage; ~4 characters per token assumed
    max_tokens: int | None = None  # the output limit the request set (None: the endpoint's own)

    @property
    def cut_off(self) -> bool:
        """The answer ended at the output limit, not where the model meant to end it."""
        return self.finish in CUT_OFF


@dataclass
class ClientSettings:
    timeout_s: float = 600.0  # per HTTP request
    max_retries: int = 4  # SDK retries on 429/5xx/connection errors, and our retries of broken streams
    concurrency: int = 8  # calls in flight per endpoint
    reasoning_effort: str | None = None  # low | medium | high, passed to reasoning models
    max_tokens: int | None = None
    temperature: float | None = None
    backoff_s: float = 1.0  # first wait before asking again after a broken stream (doubles)


class ChatClient:
    def __init__(self, spec: ModelSpec, settings: ClientSettings | None = None):
        self.spec = spec
        self.settings = s = settings or ClientSettings()
        self.slots = provider_slots(spec, s.concurrency)
        if spec.api == "anthropic":
            self.sdk = anthropic.Anthropic(api_key=spec.api_key, base_url=spec.base_url, timeout=s.timeout_s,
                                           max_retries=s.max_retries)
        else:
            self.sdk = openai.OpenAI(api_key=spec.api_key, base_url=spec.base_url, timeout=s.timeout_s,
                                     max_retries=s.max_retries)

    def close(self) -> None:
        self.sdk.close()

    def complete(self, messages: list[dict]) -> Completion:
        """Send a conversation ({role, content} dicts, system first) and return the whole answer."""
        attempts, wait = 0, self.settings.backoff_s
        while True:
            attempts += 1
            try:
                with self.slots:
                    done = self._anthropic(messages) if self.spec.api == "anthropic" else self._openai(messages)
                done.attempts = attempts
                return done
            except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError,
                    openai.BadRequestError, openai.UnprocessableEntityError,
                    anthropic.AuthenticationError, anthropic.PermissionDeniedError, anthropic.NotFoundError,
                    anthropic.BadRequestError, anthropic.UnprocessableEntityError) as exc:
                raise FatalLLMError(self.spec.label, _describe(exc), exc.status_code) from None
            except (TypeError, AttributeError, NameError) as exc:  # our own mistake: asking again will not mend it
                raise FatalLLMError(self.spec.label, f"{type(exc).__name__}: {exc}") from None
            except (openai.APIStatusError, anthropic.APIStatusError) as exc:
                # The SDK has already retried what it retries (429, 5xx): give up on this call.
                n = self.settings.max_retries
                after = f" (after {n} {'retry' if n == 1 else 'retries'})" if n else ""
                raise LLMError(self.spec.label, _describe(exc) + after, exc.status_code) from None
            except Exception as exc:  # noqa: BLE001
                # A stream broken mid-answer: the SDKs do not retry these, and Anthropic's raises its
                # HTTP library's own error, unwrapped. Anything else that went wrong is treated alike.
                if attempts > self.settings.max_retries:
                    raise LLMError(self.spec.label, f"{_describe(exc)} (after {attempts} attempts)") from None
                time.sleep(wait)
                wait = min(wait * 2, 30.0)

    def _openai(self, messages: list[dict]) -> Completion:
        s, extra = self.settings, {}
        if s.reasoning_effort:
            extra["reasoning_effort"] = s.reasoning_effort
        if s.max_tokens:
            extra["max_completion_tokens"] = s.max_tokens
        if s.temperature is not None:
            extra["temperature"] = s.temperature
        stream = self.sdk.chat.completions.create(model=self.spec.model, messages=messages, stream=True,
                                                  stream_options={"include_usage": True}, **extra)
        parts, finish, usage = [], None, None
        with stream:
            for chunk in stream:
                if chunk.usage:
                    usage = chunk.usage
                for choice in chunk.choices:
                    if choice.delta and choice.delta.content:
                        parts.append(choice.delta.content)
                    if choice.finish_reason:
                        finish = choice.finish_reason
        text = "".join(parts)
        if finish is None:
            raise BrokenStream(f"the answer stopped after {len(text)} characters with no finish reason")
        if usage is None:
            return Completion(text, _estimate(messages), len(text) // 4 + 1, finish, 1, usage_estimated=True,
                              max_tokens=s.max_tokens)
        return Completion(text, usage.prompt_tokens, usage.completion_tokens, finish, 1, max_tokens=s.max_tokens)

    def _anthropic(self, messages: list[dict]) -> Completion:
        s = self.settings
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        turns = [m for m in messages if m["role"] != "system"]
        extra: dict = {}
        max_tokens = s.max_tokens or DEFAULT_MAX_TOKENS
        if s.reasoning_effort:
            budget = ANTHROPIC_THINKING.get(s.reasoning_effort, ANTHROPIC_THINKING["medium"])
            extra["thinking"] = {"type": "enabled", "budget_tokens": budget}
            max_tokens = max(max_tokens, budget + DEFAULT_MAX_TOKENS)
        elif s.temperature is not None:  # not a parameter of the SDK's stream(): sent in the body
            extra["extra_body"] = {"temperature": s.temperature}
        if system:
            extra["system"] = system
        with self.sdk.messages.stream(model=self.spec.model, messages=turns, max_tokens=max_tokens, **extra) as stream:
            message = stream.get_final_message()
        if message.stop_reason is None:
            raise BrokenStream("the answer stopped with no stop reason")
        text = "".join(block.text for block in message.content if block.type == "text")
        return Completion(text, message.usage.input_tokens, message.usage.output_tokens, message.stop_reason, 1,
                          max_tokens=max_tokens)


def _estimate(messages: list[dict]) -> int:
    return sum(len(str(m.get("content", ""))) for m in messages) // 4 + 1


def _describe(exc: Exception) -> str:
    """One line: `HTTP 401: invalid x-api-key`, the provider's own message taken from the error's body."""
    status = getattr(exc, "status_code", None)
    message = _provider_message(getattr(exc, "body", None)) if status else None
    message = message or getattr(exc, "message", None) or str(exc) or type(exc).__name__
    message = _ONE_LINE.sub(" ", str(message)).strip()[:MESSAGE_CHARS]
    return f"HTTP {status}: {message}" if status else f"{type(exc).__name__}: {message}"


MESSAGE_CHARS = 300
_ONE_LINE = re.compile(r"\s+")


def _provider_message(body: object) -> str | None:
    """The message in an error body, whatever its shape: OpenAI's SDK hands over `{message, type, …}`,
    Anthropic's `{type: error, error: {type, message}}`, other servers `{error: "…"}`, `{detail: "…"}` or text."""
    for _ in range(3):
        if isinstance(body, str):
            return body.strip() or None
        if not isinstance(body, dict):
            return None
        inner = body.get("error")
        if isinstance(inner, (dict, str)) and inner:
            body = inner
            continue
        for key in ("message", "detail"):
            if isinstance(body.get(key), str) and body[key].strip():
                return body[key].strip()
        return None
    return None
