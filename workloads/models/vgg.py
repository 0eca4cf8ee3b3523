"""VGG19 with batch norm (16 conv3x3+BN+ReLU layers, 5 max-pools, a classifier; one layer each) and its presets.

A model file of ``workloads/models/`` (docs/models.md); class-conditional synthetic images, random weights.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from raytestbed.models import Flatten, LayeredModel, model_preset, synthetic_images

VGG19_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"]


def vgg19(name: str, size: int, batch: int, classes: int = 10, width: float = 1.0, seed: int = 0) -> LayeredModel:
    """VGG19 with batch norm (torchvision's ``vgg19_bn``): 16 conv3x3+BN+ReLU layers, 5 max-pools, then a
    classifier (one layer each).

    ``size`` 32 gives the CIFAR-style head (512 -> 512 -> classes); larger inputs
    get torchvision's 7x7 adaptive pool and 4096-wide head. Convolutions are initialised as
    torchvision's VGG (Kaiming normal, fan-out). Without batch norm the 16 plain layers train on
    the demo's synthetic task only after a plateau of tens of SGD steps (or not at all with PyTorch's
    default initialisation: the loss stayed at chance level, ln 10); with it the loss falls within
    a few steps.
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
            layers.append(nn.Sequential(nn.Conv2d(c_in, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(inplace=False)))
            names.append(f"conv{len([n for n in names if n.startswith('conv')]) + 1}")
            c_in = c
    if size <= 32:
        head = nn.Sequential(Flatten(), nn.Linear(c_in * (size // 32) ** 2, 512), nn.ReLU(), nn.Linear(512, classes))
    else:
        head = nn.Sequential(nn.AdaptiveAvgPool2d(7), Flatten(), nn.Linear(c_in * 49, 4096), nn.ReLU(),
                             nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, classes))
    layers.append(head)
    names.append("classifier")
    for mod in (m for layer in layers for m in layer.modules()):  # torchvision's VGG convolutions
        if isinstance(mod, nn.Conv2d):
            nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
            nn.init.zeros_(mod.bias)
    mi, mt = synthetic_images(seed, batch, 3, size, classes)
    return LayeredModel(name, nn.ModuleList(layers), names, mi, mt, F.cross_entropy, batch)


@model_preset("vgg19-cifar", "VGG19 (batch norm) with a CIFAR-style head, 32x32 inputs, batch 4")
def vgg19_cifar(seed: int) -> LayeredModel:
    return vgg19("vgg19-cifar", 32, 4, seed=seed)


@model_preset("vgg19-224", "torchvision-shaped VGG19 (batch norm) at 224x224, batch 1 (seconds per iteration: demos only)")
def vgg19_224(seed: int) -> LayeredModel:
    return vgg19("vgg19-224", 224, 1, classes=1000, seed=seed)
