"""An MLP (Linear+ReLU layers, a Linear classifier) and its preset, for tiny tests.

A model file of ``workloads/models/`` (docs/models.md); random weights; class-conditional inputs
(a fixed random prototype per class plus unit normal noise: a learnable task).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from raytestbed.models import LayeredModel, model_preset


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
    protos = torch.randn(classes, widths[0], generator=gen)  # class-conditional: prototype + noise
    ys = torch.randint(0, classes, (max(batch, 1) * 4,), generator=gen)
    xs = protos[ys] + torch.randn(ys.shape[0], widths[0], generator=gen)
    return LayeredModel(name, nn.ModuleList(layers), names, lambda b: xs[:b], lambda b: ys[:b],
                        F.cross_entropy, batch)


@model_preset("mlp-tiny", "MLP 256-512-512-256 -> 10 classes, batch 16 (tests)")
def mlp_tiny(seed: int) -> LayeredModel:
    return mlp("mlp-tiny", (256, 512, 512, 256), 16, seed=seed)
