"""Truncated GPT (embedding, pre-LN transformer blocks, LM head; one layer each) and its presets.

A model file of ``workloads/models/`` (docs/models.md): each ``@model_preset`` function builds a
fresh :class:`~raytestbed.models.LayeredModel` from a seed (random weights; synthetic tokens that
follow a fixed random permutation, so the next-token loss can fall).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from raytestbed.models import LayeredModel, model_preset, synthetic_tokens


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
    make_input, make_target = synthetic_tokens(seed, batch, seq, vocab)

    def loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))

    return LayeredModel(name, layers, names, make_input, make_target, loss, batch)


@model_preset("gpt-small", "truncated GPT-2 width: 3 blocks, d 768, 12 heads, seq 128, vocab 8192, batch 1")
def gpt_small(seed: int) -> LayeredModel:
    return gpt("gpt-small", 3, 768, 12, 128, 8192, 1, seed)


@model_preset("gpt-tiny", "truncated GPT: 2 blocks, d 128, 4 heads, seq 64, vocab 1024, batch 2")
def gpt_tiny(seed: int) -> LayeredModel:
    return gpt("gpt-tiny", 2, 128, 4, 64, 1024, 2, seed)
