"""Models people run, built from their libraries' configs with random weights (nothing is downloaded), at a tiny
size (a CPU, the tests) or a realistic inference size: HuggingFace `transformers` decoders and encoders, a
`torchvision` CNN, `timm` CNNs and ViTs. `model_file` writes one as a model file `kernelcraft apply` takes.

    from kernelcraft import zoo
    model, inputs = zoo.build("llama", "real", "bfloat16")
    Path("llama.py").write_text(zoo.model_file("llama", "real", "bfloat16"))   # kernelcraft apply llama.py

The libraries are not kernelcraft's dependencies: a model whose library is missing raises ZooError naming the
package to install.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn

from kernelcraft.errors import KernelcraftError

SIZES = ("tiny", "real")
DTYPES = ("float32", "bfloat16", "float16")


class ZooError(KernelcraftError):
    """An unknown model, size or dtype, or a model whose library is not installed."""


class LogitsOf(nn.Module):
    """A HuggingFace model called on token ids, returning one tensor (its logits or last hidden state), without a
    KV cache: the forward a model file's `Model` has."""

    def __init__(self, model: nn.Module, output: str):
        super().__init__()
        self.model, self.output = model, output

    def forward(self, input_ids):
        kwargs = {"use_cache": False} if self.output == "logits" else {}
        return getattr(self.model(input_ids=input_ids, **kwargs), self.output)


@dataclass(frozen=True)
class Entry:
    name: str
    library: str  # the package it needs
    what: str
    build: Callable[[str], tuple[nn.Module, list]]  # size -> (model in fp32, inputs)


def _module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ZooError(f"this model needs the {name.split('.')[0]} package ({exc}); pip install "
                       f"{name.split('.')[0]}") from None


def _tokens(vocab: int, batch: int, length: int) -> list:
    return [torch.randint(0, vocab, (batch, length))]


def _hf(config_class: str, model_class: str, output: str, tiny: dict, real: dict, inputs: dict):
    def build(size: str):
        tf = _module("transformers")
        settings = tiny if size == "tiny" else real
        config = getattr(tf, config_class)(**settings)
        config._attn_implementation = "sdpa"
        model = LogitsOf(getattr(tf, model_class)(config), output)
        batch, length = inputs[size]
        return model, _tokens(config.vocab_size, batch, length)
    return build


def _torchvision(name: str, tiny: dict, real: dict, images: dict):
    def build(size: str):
        models = _module("torchvision.models")
        model = getattr(models, name)(weights=None, **(tiny if size == "tiny" else real))
        return model, [torch.randn(*images[size])]
    return build


def _timm(name: str, tiny: dict, real: dict, images: dict):
    def build(size: str):
        timm = _module("timm")
        model = timm.create_model(name, pretrained=False, **(tiny if size == "tiny" else real))
        return model, [torch.randn(*images[size])]
    return build


_SMALL_VOCAB = {"vocab_size": 512}
ENTRIES = {e.name: e for e in [
    Entry("gpt2", "transformers", "GPT-2 small (124M), 8 x 512 tokens",
          _hf("GPT2Config", "GPT2LMHeadModel", "logits",
              {"n_layer": 2, "n_embd": 64, "n_head": 4, "n_positions": 64, "bos_token_id": 0, "eos_token_id": 0,
               **_SMALL_VOCAB}, {},
              {"tiny": (2, 16), "real": (8, 512)})),
    Entry("llama", "transformers", "a Llama-style decoder: 4 layers, 2048 wide, grouped-query attention (32 heads, "
          "8 for keys and values), RoPE, RMSNorm, SwiGLU; 4 x 1024 tokens",
          _hf("LlamaConfig", "LlamaForCausalLM", "logits",
              {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
               "num_key_value_heads": 2, "max_position_embeddings": 64, **_SMALL_VOCAB},
              {"hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 4, "num_attention_heads": 32,
               "num_key_value_heads": 8, "max_position_embeddings": 2048, "vocab_size": 32000},
              {"tiny": (2, 16), "real": (4, 1024)})),
    Entry("bert", "transformers", "BERT-base encoder, 32 x 128 tokens",
          _hf("BertConfig", "BertModel", "last_hidden_state",
              {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
               **_SMALL_VOCAB}, {}, {"tiny": (2, 16), "real": (32, 128)})),
    Entry("t5", "transformers", "T5-base encoder, 16 x 256 tokens",
          _hf("T5Config", "T5EncoderModel", "last_hidden_state",
              {"d_model": 64, "d_ff": 128, "num_layers": 2, "num_heads": 4, "d_kv": 16, **_SMALL_VOCAB},
              {"d_model": 768, "d_ff": 3072, "num_layers": 12, "num_heads": 12, "d_kv": 64},
              {"tiny": (2, 16), "real": (16, 256)})),
    Entry("resnet50", "torchvision", "ResNet-50, 32 x 224 x 224 images",
          _torchvision("resnet50", {"num_classes": 10}, {}, {"tiny": (2, 3, 32, 32), "real": (32, 3, 224, 224)})),
    Entry("vit", "timm", "ViT-B/16, 32 x 224 x 224 images",
          _timm("vit_base_patch16_224", {"img_size": 32, "patch_size": 8, "embed_dim": 64, "depth": 2,
                                         "num_heads": 4, "num_classes": 10}, {},
                {"tiny": (2, 3, 32, 32), "real": (32, 3, 224, 224)})),
    Entry("convnext", "timm", "ConvNeXt-T, 32 x 224 x 224 images",
          _timm("convnext_tiny", {"depths": (1, 1, 1, 1), "dims": (16, 32, 64, 128), "num_classes": 10}, {},
                {"tiny": (2, 3, 32, 32), "real": (32, 3, 224, 224)})),
]}


def _check(name: str, size: str, dtype: str) -> None:
    if name not in ENTRIES:
        raise ZooError(f"no model {name!r} in the zoo; it has {', '.join(ENTRIES)}")
    if size not in SIZES or dtype not in DTYPES:
        raise ZooError(f"size is one of {', '.join(SIZES)} and dtype one of {', '.join(DTYPES)}; got {size!r}, "
                       f"{dtype!r}")


def build(name: str, size: str = "tiny", dtype: str = "float32", seed: int = 0) -> tuple[nn.Module, list]:
    """(the model in eval mode, in `dtype`, weights drawn under `seed`; its example inputs)."""
    _check(name, size, dtype)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model, inputs = ENTRIES[name].build(size)
    cast = getattr(torch, dtype)
    return model.to(cast).eval(), [x.to(cast) if x.is_floating_point() else x for x in inputs]


def model_file(name: str, size: str = "tiny", dtype: str = "float32", seed: int = 0) -> str:
    """A model file in `apply`'s model-and-inputs form that builds the model (the zoo is imported there: the
    file is the user's code, run as the reference runs it)."""
    _check(name, size, dtype)
    return (f'"""{ENTRIES[name].what}, {size} size, {dtype}: kernelcraft.zoo."""\n'
            "from kernelcraft import zoo\n\n"
            f"model, example_inputs = zoo.build({name!r}, {size!r}, {dtype!r}, seed={seed})\n")
