"""The layered-model contract shared by the model files, the profiler and the emulator, and helpers for model files."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class LayeredModel:
    """A model as consecutive layers.

    Attributes:
        name: preset name (e.g. ``gpt-small``).
        layers: the layers in execution order; layer i consumes layer i-1's output.
        layer_names: a short name per layer.
        make_input: batch size -> input of layer 0 (float tensor, or token ids).
        make_target: batch size -> target for ``loss``.
        loss: (last layer's output, target) -> scalar loss.
        batch_size: the preset's default mini-batch size.
    """

    name: str
    layers: nn.ModuleList
    layer_names: list[str]
    make_input: Callable[[int], torch.Tensor]
    make_target: Callable[[int], torch.Tensor]
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    batch_size: int

    def __post_init__(self) -> None:
        if len(self.layers) != len(self.layer_names):
            raise ValueError("one name per layer")

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def stage(self, start: int, end: int) -> nn.Sequential:
        """Layers ``start`` .. ``end - 1`` as one module (a pipeline stage)."""
        if not 0 <= start < end <= self.num_layers:
            raise ValueError(f"{self.name}: bad layer range [{start}, {end}) of {self.num_layers}")
        return nn.Sequential(*self.layers[start:end])

    def parameter_bytes(self, start: int = 0, end: int | None = None) -> int:
        """Bytes of trainable parameters of layers ``start`` .. ``end - 1``."""
        end = self.num_layers if end is None else end
        return sum(p.numel() * p.element_size() for layer in self.layers[start:end]
                   for p in layer.parameters() if p.requires_grad)

    def train_step(self, batch_size: int | None = None, optimizer: torch.optim.Optimizer | None = None) -> float:
        """One real forward + backward (+ optimizer step) over the whole model; returns the loss."""
        b = batch_size or self.batch_size
        x = self.make_input(b)
        for layer in self.layers:
            x = layer(x)
        loss = self.loss(x, self.make_target(b))
        if optimizer is not None:
            optimizer.zero_grad()
        loss.backward()
        if optimizer is not None:
            optimizer.step()
        return float(loss.detach())


class Flatten(nn.Module):
    """(B, ...) -> (B, prod(...))."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1)


def synthetic_images(seed: int, batch: int, channels: int, size: int, classes: int, noise: float = 1.0):
    """Fixed class-conditional images for a seed: (make_input, make_target), each batch size -> tensor.

    A learnable task: each class has a fixed random prototype image (a 4x4 image of unit normal
    pixels, upsampled to ``size``: coarse blobs of colour that survive pooling); a sample of class y
    is its prototype plus ``noise`` x unit normal noise per pixel; labels uniform. A model of any
    size in the zoo separates the classes within tens of SGD steps, so a falling loss shows that
    training works (random labels would leave a deep model at chance level, ln(classes)).
    """
    gen = torch.Generator().manual_seed(seed + 1)
    n = max(batch, 1) * 4
    coarse = torch.randn(classes, channels, min(4, size), min(4, size), generator=gen)
    protos = torch.nn.functional.interpolate(coarse, size=size, mode="nearest")
    ys = torch.randint(0, classes, (n,), generator=gen)
    xs = protos[ys] + noise * torch.randn(n, channels, size, size, generator=gen)
    return (lambda b: xs[:b]), (lambda b: ys[:b])


def synthetic_tokens(seed: int, batch: int, seq: int, vocab: int):
    """Fixed token sequences that follow a hidden rule, for language models: (make_input, make_target).

    Each row starts at a random token and continues by a fixed random permutation of the vocabulary
    (token t+1 = perm[token t]); inputs are tokens 0..seq-1, targets tokens 1..seq. Next-token loss
    starts at about ln(vocab) and falls as the model learns the permutation.
    """
    gen = torch.Generator().manual_seed(seed + 1)
    n = max(batch, 1) * 4
    perm = torch.randperm(vocab, generator=gen)
    rows = torch.empty(n, seq + 1, dtype=torch.int64)
    rows[:, 0] = torch.randint(0, vocab, (n,), generator=gen)
    for t in range(seq):
        rows[:, t + 1] = perm[rows[:, t]]
    return (lambda b: rows[:b, :-1]), (lambda b: rows[:b, 1:])
