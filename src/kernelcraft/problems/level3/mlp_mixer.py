"""Small MLP-Mixer: patch embedding, mixer layers (token-mixing and channel-mixing MLPs), mean pool, linear head."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
image_size = 224
patch_size = 16
hidden_dim = 512
token_mlp_dim = 256
channel_mlp_dim = 2048
depth = 4
num_classes = 1000

SMALL_SIZES = {"batch_size": 2, "image_size": 48, "hidden_dim": 30, "token_mlp_dim": 17,
               "channel_mlp_dim": 61, "depth": 2, "num_classes": 37}


class MlpBlock(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class MixerLayer(nn.Module):
    def __init__(self, num_tokens: int, dim: int, token_mlp_dim: int, channel_mlp_dim: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.token_mlp = MlpBlock(num_tokens, token_mlp_dim)
        self.norm2 = nn.LayerNorm(dim)
        self.channel_mlp = MlpBlock(dim, channel_mlp_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (batch, tokens, dim)
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))


class Model(nn.Module):
    def __init__(self, image_size: int, patch_size: int, hidden_dim: int, token_mlp_dim: int,
                 channel_mlp_dim: int, depth: int, num_classes: int):
        super().__init__()
        num_tokens = (image_size // patch_size) ** 2
        self.patch_embed = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        self.layers = nn.Sequential(
            *[MixerLayer(num_tokens, hidden_dim, token_mlp_dim, channel_mlp_dim) for _ in range(depth)]
        )
        self.norm = nn.LayerNorm(hidden_dim)
        self.head = nn.Linear(hidden_dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # (batch, tokens, hidden_dim)
        x = self.norm(self.layers(x))
        return self.head(x.mean(dim=1))


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [image_size, patch_size, hidden_dim, token_mlp_dim, channel_mlp_dim, depth, num_classes]
