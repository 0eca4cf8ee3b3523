"""Model registry: real ``torch.nn`` models cut into consecutive layers, for the emulator and profiler.

The model definitions are files in ``workloads/models/`` (truncated GPT, VGG19, a small ResNet,
an MLP); a user adds a model by dropping a file there (:mod:`raytestbed.models.registry`,
docs/models.md). Every model is a :class:`~raytestbed.models.base.LayeredModel`: an ordered
list of layers (each an ``nn.Module`` taking the previous layer's output), a synthetic input
batch, a synthetic target and a loss. A pipeline stage is a contiguous layer range
(``model.stage(start, end)``). Weights are random (seeded); nothing is downloaded.
:data:`PRESETS` maps each name to its preset (``raytestbed profile --list``);
:func:`build_model` builds one by name.
"""

from raytestbed.models.base import Flatten, LayeredModel, synthetic_images, synthetic_tokens
from raytestbed.models.registry import PRESETS, Preset, build_model, model_preset

__all__ = ["Flatten", "LayeredModel", "PRESETS", "Preset", "build_model", "model_preset", "synthetic_images",
           "synthetic_tokens"]
