"""Chat-model proposers: OpenAI-compatible endpoints and Anthropic, prompts as text files."""

from kernelcraft.propose.llm.client import ChatClient, ClientSettings, FatalLLMError, LLMError
from kernelcraft.propose.llm.proposer import LLMProposer
from kernelcraft.propose.llm.providers import ConfigError, ModelSpec, PriceTable, resolve_model

__all__ = ["ChatClient", "ClientSettings", "FatalLLMError", "LLMError", "LLMProposer", "ConfigError", "ModelSpec",
           "PriceTable", "resolve_model"]
