"""propose/llm/providers.py: --model/--base-url/--api-key resolution and the price table (no network)."""

from __future__ import annotations

import json

import pytest

from kernelcraft.propose.llm.providers import PRICES, PROVIDERS, ConfigError, ModelSpec, PriceTable, resolve_model

ENV = ["KERNELCRAFT_MODEL", "KERNELCRAFT_BASE_URL", "KERNELCRAFT_API_KEY", "KERNELCRAFT_PRICES"] + \
      [key for _, _, key in PROVIDERS.values() if key]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No key or KERNELCRAFT_* setting of the machine running the tests leaks in."""
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


# resolve_model ----------------------------------------------------------------------------------------

def test_openai_key_from_its_variable(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    spec = resolve_model("openai/o3")
    assert spec == ModelSpec("openai", "openai", "o3", None, "sk-openai")
    assert spec.label == "openai/o3"


def test_openai_missing_key_names_the_variable():
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        resolve_model("openai/o3")


def test_anthropic(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    assert resolve_model("anthropic/claude-sonnet-4-5") == \
        ModelSpec("anthropic", "anthropic", "claude-sonnet-4-5", None, "sk-ant")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        resolve_model("anthropic/claude-sonnet-4-5")


def test_openrouter_keeps_the_rest_of_the_name(monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or")
    spec = resolve_model("openrouter/meta-llama/llama-3.3-70b")
    assert spec.provider == "openrouter" and spec.api == "openai"
    assert spec.model == "meta-llama/llama-3.3-70b"
    assert spec.base_url == "https://openrouter.ai/api/v1"
    assert spec.api_key == "sk-or"
    assert spec.label == "openrouter/meta-llama/llama-3.3-70b"


@pytest.mark.parametrize("provider, variable", [("openrouter", "OPENROUTER_API_KEY"), ("gemini", "GEMINI_API_KEY"),
                                                ("deepseek", "DEEPSEEK_API_KEY")])
def test_hosted_provider_with_default_url_still_needs_its_key(provider, variable):
    # These providers have a default (remote, paid) base URL; without their key every call would be a 401.
    with pytest.raises(ConfigError, match=variable):
        resolve_model(f"{provider}/some-model")


def test_vllm_needs_no_key():
    spec = resolve_model("vllm/Qwen/Qwen3-32B")
    assert spec == ModelSpec("vllm", "openai", "Qwen/Qwen3-32B", "http://localhost:8000/v1", "none")


def test_base_url_flag_overrides_the_provider_default():
    spec = resolve_model("vllm/m", base_url="http://gpu-box:9000/v1", api_key="tok")
    assert spec.base_url == "http://gpu-box:9000/v1" and spec.api_key == "tok"


def test_openai_with_base_url_takes_any_key():
    # a proxy / local OpenAI-compatible server under the openai name needs no OpenAI key
    spec = resolve_model("openai/gpt-4o", base_url="http://127.0.0.1:1234/v1")
    assert spec.api_key == "none" and spec.base_url == "http://127.0.0.1:1234/v1" and spec.model == "gpt-4o"


def test_flag_key_wins(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert resolve_model("openai/o3", api_key="from-flag").api_key == "from-flag"


def test_unknown_prefix_without_base_url():
    with pytest.raises(ConfigError) as err:
        resolve_model("Qwen/Qwen3-32B")
    assert "'Qwen'" in str(err.value) and "--base-url" in str(err.value)


def test_unknown_prefix_with_base_url_is_openai_compatible():
    spec = resolve_model("Qwen/Qwen3-32B", base_url="http://localhost:8001/v1")
    assert spec == ModelSpec("openai-compatible", "openai", "Qwen/Qwen3-32B", "http://localhost:8001/v1", "none")


def test_bare_name_with_base_url_is_openai_compatible():
    spec = resolve_model("llama3", base_url="http://localhost:8001/v1", api_key="k")
    assert (spec.provider, spec.model, spec.api_key) == ("openai-compatible", "llama3", "k")


def test_environment_fallbacks(monkeypatch):
    monkeypatch.setenv("KERNELCRAFT_MODEL", "my-org/my-model")
    monkeypatch.setenv("KERNELCRAFT_BASE_URL", "http://10.0.0.2:8000/v1")
    monkeypatch.setenv("KERNELCRAFT_API_KEY", "kc-key")
    spec = resolve_model("")
    assert spec == ModelSpec("openai-compatible", "openai", "my-org/my-model", "http://10.0.0.2:8000/v1", "kc-key")
    # flags win over the variables
    spec = resolve_model("vllm/x", base_url="http://other/v1", api_key="flag")
    assert (spec.model, spec.base_url, spec.api_key) == ("x", "http://other/v1", "flag")


def test_kernelcraft_api_key_serves_any_provider(monkeypatch):
    monkeypatch.setenv("KERNELCRAFT_API_KEY", "kc-key")
    assert resolve_model("anthropic/claude-opus-4-5").api_key == "kc-key"


def test_empty_model_is_an_error():
    with pytest.raises(ConfigError, match="--model"):
        resolve_model("")
    with pytest.raises(ConfigError):
        resolve_model(None)


# PriceTable -------------------------------------------------------------------------------------------

def test_bundled_table_loads():
    table = PriceTable()
    bundled = json.loads(PRICES.read_text())["usd_per_mtok"]
    assert table.table == bundled
    assert table.price("o3") == (2.0, 8.0)
    assert table.price("claude-opus-4-5") == (5.0, 25.0)


@pytest.mark.parametrize("model, price", [
    ("gpt-4o-mini-2024-07-18", (0.15, 0.6)),  # not gpt-4o
    ("gpt-4o-2024-08-06", (2.5, 10.0)),
    ("o3-mini-high", (1.1, 4.4)),  # not o3
    ("claude-opus-4-1-20250805", (15.0, 75.0)),  # not claude-opus-4
    ("claude-opus-4-5-20251101", (5.0, 25.0)),
    ("gpt-5-nano", (0.05, 0.4)),
])
def test_longest_prefix_wins(model, price):
    assert PriceTable().price(model) == price


def test_unknown_model_has_no_price():
    table = PriceTable()
    assert table.price("llama-3-70b") is None
    assert table.cost("llama-3-70b", 1000, 1000) is None
    assert table.price("gpt") is None  # a prefix of a known name is not that name


def test_cost_arithmetic():
    table = PriceTable()
    assert table.cost("gpt-4o", 1_000_000, 0) == pytest.approx(2.5)
    assert table.cost("gpt-4o", 0, 1_000_000) == pytest.approx(10.0)
    assert table.cost("claude-sonnet-4-5", 12_000, 3_000) == pytest.approx((12_000 * 3.0 + 3_000 * 15.0) / 1e6)
    assert table.cost("o3", 0, 0) == 0.0


def test_extra_file_extends_and_overrides(tmp_path):
    extra = tmp_path / "prices.json"
    extra.write_text(json.dumps({"usd_per_mtok": {"gpt-4o": [1.0, 2.0], "qwen3": [0.1, 0.2]}}))
    table = PriceTable(extra)
    assert table.price("gpt-4o") == (1.0, 2.0)
    assert table.price("gpt-4o-mini") == (0.15, 0.6)  # untouched entries stay
    assert table.price("qwen3-32b") == (0.1, 0.2)
    assert table.cost("qwen3-32b", 2_000_000, 1_000_000) == pytest.approx(0.4)


def test_extra_file_may_be_a_flat_mapping(tmp_path):
    extra = tmp_path / "flat.json"
    extra.write_text(json.dumps({"my-model": [3, 4]}))
    assert PriceTable(str(extra)).price("my-model-v2") == (3, 4)


def test_prices_from_environment(tmp_path, monkeypatch):
    extra = tmp_path / "env-prices.json"
    extra.write_text(json.dumps({"usd_per_mtok": {"local-model": [0.0, 0.0]}}))
    monkeypatch.setenv("KERNELCRAFT_PRICES", str(extra))
    assert PriceTable().price("local-model") == (0.0, 0.0)
    assert PriceTable().cost("local-model", 10, 10) == 0.0


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", ""])
def test_malformed_file(tmp_path, content):
    extra = tmp_path / "bad.json"
    extra.write_text(content)
    with pytest.raises(ConfigError, match="bad.json"):
        PriceTable(extra)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="missing.json"):
        PriceTable(tmp_path / "missing.json")


@pytest.mark.parametrize("entry", [[1.0], [1.0, 2.0, 3.0], ["1", "2"], {"input": 1, "output": 2}, 5, None])
def test_malformed_entry(tmp_path, entry):
    extra = tmp_path / "entry.json"
    extra.write_text(json.dumps({"usd_per_mtok": {"odd-model": entry}}))
    with pytest.raises(ConfigError, match="odd-model"):
        PriceTable(extra)


@pytest.mark.parametrize("table", [[1, 2], [["a", "b", "c"]], "text"])
def test_price_table_that_is_not_an_object(tmp_path, table):
    extra = tmp_path / "shape.json"
    extra.write_text(json.dumps({"usd_per_mtok": table}))
    with pytest.raises(ConfigError):
        PriceTable(extra)
