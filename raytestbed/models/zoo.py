"""Model builders (truncated GPT, VGG19, a small ResNet, an MLP) and their presets.

Sizes are chosen so that one training iteration takes roughly 10-500 ms on one CPU
core of this project's machine (host-measurements.md §5); the table in
``docs/models.md`` gives measured times. Inputs and targets are synthetic but
fixed for a given seed, so repeated steps on the same batch must reduce the loss.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from raytestbed.models.base import LayeredModel

# ---------------------------------------------------------------------------
# Truncated GPT
# ---------------------------------------------------------------------------


class GptEmbedding(nn.Module):
    """Token + learned position embedding: (B, T) int64 -> (B, T, d)."""

    def __init__(self, vocab: int, seq: int, d: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        return self.tok(ids) + self.pos(torch.arange(t, device=ids.device))


class GptBlock(nn.Module):
    """Pre-LN transformer block with causal self-attention (GPT-2 shape)."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        shape = (b, t, self.heads, d // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GptHead(nn.Module):
    """Final LayerNorm + LM head: (B, T, d) -> (B, T, vocab) logits."""

    def __init__(self, d: int, vocab: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.out = nn.Linear(d, vocab, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.ln(x))


def gpt(name: str, blocks: int, d: int, heads: int, seq: int, vocab: int, batch: int, seed: int = 0) -> LayeredModel:
    """A truncated GPT: embedding, ``blocks`` transformer blocks, LM head (one layer each)."""
    torch.manual_seed(seed)
    layers = nn.ModuleList([GptEmbedding(vocab, seq, d), *(GptBlock(d, heads) for _ in range(blocks)),
                            GptHead(d, vocab)])
    names = ["embed"] + [f"block{i}" for i in range(blocks)] + ["head"]
    gen = torch.Generator().manual_seed(seed + 1)
    data = torch.randint(0, vocab, (max(batch, 1) * 4, seq + 1), generator=gen)

    def make_input(b: int) -> torch.Tensor:
        return data[:b, :-1]

    def make_target(b: int) -> torch.Tensor:
        return data[:b, 1:]

    def loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))

    return LayeredModel(name, layers, names, make_input, make_target, loss, batch)


# ---------------------------------------------------------------------------
# VGG19 and a small ResNet (image classification)
# ---------------------------------------------------------------------------

VGG19_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"]


class Flatten(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1)


def _image_data(seed: int, batch: int, channels: int, size: int, classes: int):
    gen = torch.Generator().manual_seed(seed + 1)
    n = max(batch, 1) * 4
    xs = torch.randn(n, channels, size, size, generator=gen)
    ys = torch.randint(0, classes, (n,), generator=gen)
    return (lambda b: xs[:b]), (lambda b: ys[:b])


def vgg19(name: str, size: int, batch: int, classes: int = 10, width: float = 1.0, seed: int = 0) -> LayeredModel:
    """VGG19: 16 conv3x3+ReLU layers, 5 max-pools, then a classifier (one layer each).

    ``size`` 32 gives the CIFAR-style head (512 -> 512 -> classes); larger inputs
    get torchvision's 7x7 adaptive pool and 4096-wide head.
    """
    torch.manual_seed(seed)
    layers, names, c_in, pools = [], [], 3, 0
    for v in VGG19_CFG:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
            pools += 1
            names.append(f"pool{pools}")
        else:
            c = max(1, int(v * width))
            layers.append(nn.Sequential(nn.Conv2d(c_in, c, 3, padding=1), nn.ReLU(inplace=False)))
            names.append(f"conv{len([n for n in names if n.startswith('conv')]) + 1}")
            c_in = c
    if size <= 32:
        head = nn.Sequential(Flatten(), nn.Linear(c_in * (size // 32) ** 2, 512), nn.ReLU(), nn.Linear(512, classes))
    else:
        head = nn.Sequential(nn.AdaptiveAvgPool2d(7), Flatten(), nn.Linear(c_in * 49, 4096), nn.ReLU(),
                             nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, classes))
    layers.append(head)
    names.append("classifier")
    mi, mt = _image_data(seed, batch, 3, size, classes)
    return LayeredModel(name, nn.ModuleList(layers), names, mi, mt, F.cross_entropy, batch)


class BasicBlock(nn.Module):
    """ResNet basic block (two 3x3 convs + identity or 1x1 projection)."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(c_out)
        self.c2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(c_out)
        self.short = (nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
                      if stride != 1 or c_in != c_out else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(y)) + self.short(x))


def resnet(name: str, widths: tuple[int, ...], blocks_per_stage: int, size: int, batch: int,
           classes: int = 10, seed: int = 0) -> LayeredModel:
    """A small ResNet: stem, ``len(widths)`` stages of basic blocks (one layer each block), head."""
    torch.manual_seed(seed)
    layers = [nn.Sequential(nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU())]
    names = ["stem"]
    c = widths[0]
    for si, w in enumerate(widths):
        for bi in range(blocks_per_stage):
            layers.append(BasicBlock(c, w, 2 if (bi == 0 and si > 0) else 1))
            names.append(f"stage{si}.block{bi}")
            c = w
    layers.append(nn.Sequential(nn.AdaptiveAvgPool2d(1), Flatten(), nn.Linear(c, classes)))
    names.append("head")
    mi, mt = _image_data(seed, batch, 3, size, classes)
    return LayeredModel(name, nn.ModuleList(layers), names, mi, mt, F.cross_entropy, batch)


def mlp(name: str, widths: tuple[int, ...], batch: int, classes: int = 10, seed: int = 0) -> LayeredModel:
    """An MLP: Linear+ReLU layers then a Linear classifier (for tiny tests)."""
    torch.manual_seed(seed)
    layers, names = [], []
    for i in range(len(widths) - 1):
        layers.append(nn.Sequential(nn.Linear(widths[i], widths[i + 1]), nn.ReLU()))
        names.append(f"fc{i}")
    layers.append(nn.Linear(widths[-1], classes))
    names.append("out")
    gen = torch.Generator().manual_seed(seed + 1)
    xs = torch.randn(max(batch, 1) * 4, widths[0], generator=gen)
    ys = torch.randint(0, classes, (xs.shape[0],), generator=gen)
    return LayeredModel(name, nn.ModuleList(layers), names, lambda b: xs[:b], lambda b: ys[:b],
                        F.cross_entropy, batch)


# ---------------------------------------------------------------------------
# Presets
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Preset:
    """A named model size; ``build(seed)`` returns a fresh model."""

    name: str
    description: str
    factory: Callable[[int], LayeredModel]

    def build(self, seed: int = 0) -> LayeredModel:
        return self.factory(seed)


PRESETS: dict[str, Preset] = {p.name: p for p in [
    Preset("gpt-small", "truncated GPT-2 width: 3 blocks, d 768, 12 heads, seq 128, vocab 8192, batch 1",
           lambda s: gpt("gpt-small", 3, 768, 12, 128, 8192, 1, s)),
    Preset("gpt-tiny", "truncated GPT: 2 blocks, d 128, 4 heads, seq 64, vocab 1024, batch 2",
           lambda s: gpt("gpt-tiny", 2, 128, 4, 64, 1024, 2, s)),
    Preset("vgg19-cifar", "VGG19 with a CIFAR-style head, 32x32 inputs, batch 4",
           lambda s: vgg19("vgg19-cifar", 32, 4, seed=s)),
    Preset("vgg19-224", "torchvision-shaped VGG19 at 224x224, batch 1 (seconds per iteration: demos only)",
           lambda s: vgg19("vgg19-224", 224, 1, classes=1000, seed=s)),
    Preset("resnet-small", "ResNet-style: 3 stages (32/64/128) x 2 basic blocks, 32x32 inputs, batch 8",
           lambda s: resnet("resnet-small", (32, 64, 128), 2, 32, 8, seed=s)),
    Preset("mlp-tiny", "MLP 256-512-512-256 -> 10 classes, batch 16 (tests)",
           lambda s: mlp("mlp-tiny", (256, 512, 512, 256), 16, seed=s)),
]}


def build_model(preset: str, seed: int = 0) -> LayeredModel:
    """Build a preset by name; ValueError lists the known presets."""
    if preset not in PRESETS:
        raise ValueError(f"unknown model preset {preset!r} (known: {', '.join(PRESETS)})")
    return PRESETS[preset].build(seed)
