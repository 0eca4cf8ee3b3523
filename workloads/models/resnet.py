"""A small ResNet (stem, stages of basic blocks, head; one layer each block) and its preset.

A model file of ``workloads/models/`` (docs/models.md); class-conditional synthetic images, random weights.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from raytestbed.models import Flatten, LayeredModel, model_preset, synthetic_images


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
    mi, mt = synthetic_images(seed, batch, 3, size, classes)
    return LayeredModel(name, nn.ModuleList(layers), names, mi, mt, F.cross_entropy, batch)


@model_preset("resnet-small", "ResNet-style: 3 stages (32/64/128) x 2 basic blocks, 32x32 inputs, batch 8")
def resnet_small(seed: int) -> LayeredModel:
    return resnet("resnet-small", (32, 64, 128), 2, 32, 8, seed=seed)
