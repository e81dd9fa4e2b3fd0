"""Which API a `--model` speaks, where it lives, which key it takes, and what it costs.

`--model PROVIDER/NAME`: `anthropic/…` goes through Anthropic's SDK; every other provider here speaks
the OpenAI chat-completions API (through the `openai` SDK's base URL). A model with no known provider
prefix is sent as written to `--base-url` (vLLM, SGLang, any OpenAI-compatible server).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from kernelcraft.errors import ConfigError

PRICES = Path(__file__).parent / "prices.json"

# provider: (api, default base URL, environment variable holding its key)
PROVIDERS = {
    "openai": ("openai", None, "OPENAI_API_KEY"),
    "anthropic": ("anthropic", None, "ANTHROPIC_API_KEY"),
    "gemini": ("openai", "https://generativelanguage.googleapis.com/v1beta/openai/", "GEMINI_API_KEY"),
    "openrouter": ("openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "deepseek": ("openai", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    "ollama": ("openai", "http://localhost:11434/v1", None),
    "vllm": ("openai", "http://localhost:8000/v1", None),
    "sglang": ("openai", "http://localhost:30000/v1", None),
}


@dataclass(frozen=True)
class ModelSpec:
    provider: str
    api: str  # "openai" | "anthropic"
    model: str  # the name sent to the endpoint
    base_url: str | None
    api_key: str

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.model}"


def resolve_model(model: str, base_url: str | None = None, api_key: str | None = None) -> ModelSpec:
    """A ModelSpec from the `--model`/`--base-url`/`--api-key` flags (or KERNELCRAFT_* variables)."""
    model = model or os.environ.get("KERNELCRAFT_MODEL", "")
    base_url = base_url or os.environ.get("KERNELCRAFT_BASE_URL") or None
    api_key = api_key or os.environ.get("KERNELCRAFT_API_KEY") or None
    if not model:
        raise ConfigError("no model given: pass --model PROVIDER/NAME (e.g. openai/o3, anthropic/claude-sonnet-4-6)")
    prefix, _, name = model.partition("/")
    if prefix in PROVIDERS and name:
        api, default_url, key_env = PROVIDERS[prefix]
        provider = prefix
    else:  # e.g. "Qwen/Qwen3-32B" served by vLLM at --base-url
        if not base_url:
            known = ", ".join(PROVIDERS)
            raise ConfigError(f"--model {model}: unknown provider {prefix!r} (known: {known}); "
                              "for another OpenAI-compatible server pass --base-url")
        api, default_url, key_env, provider, name = "openai", None, None, "openai-compatible", model
    own_url = base_url  # a URL the user gave may be a local server that takes any key
    base_url = base_url or default_url
    if not api_key and key_env:
        api_key = os.environ.get(key_env)
    if not api_key:
        if key_env and not own_url:
            raise ConfigError(f"--model {model}: no API key (set {key_env} or KERNELCRAFT_API_KEY, or pass --api-key)")
        api_key = "none"  # local servers take any key
    return ModelSpec(provider, api, name, base_url, api_key)


class PriceTable:
    """USD per million input and output tokens, by model name (longest matching prefix wins).

    The bundled table (prices.json) can be extended or overridden by a JSON file of the same shape,
    given with `--prices FILE` or KERNELCRAFT_PRICES.
    """

    def __init__(self, extra: str | Path | None = None):
        self.table = dict(json.loads(PRICES.read_text())["usd_per_mtok"])
        extra = extra or os.environ.get("KERNELCRAFT_PRICES")
        if extra:
            try:
                data = json.loads(Path(extra).read_text())
                table = data.get("usd_per_mtok", data) if isinstance(data, dict) else data
                if not isinstance(table, dict):
                    raise ValueError("expected {\"usd_per_mtok\": {MODEL: [input, output]}}")
                self.table.update(table)
            except (OSError, ValueError, AttributeError) as exc:
                raise ConfigError(f"price file {extra}: {exc}") from None
        for name, pair in self.table.items():
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, (int, float)) for x in pair)):
                raise ConfigError(f"price for {name!r} must be [input, output] USD per million tokens, got {pair!r}")

    def price(self, model: str) -> tuple[float, float] | None:
        matches = [k for k in self.table if model == k or model.startswith(k)]
        return tuple(self.table[max(matches, key=len)]) if matches else None

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float | None:
        p = self.price(model)
        return None if p is None else (input_tokens * p[0] + output_tokens * p[1]) / 1e6
