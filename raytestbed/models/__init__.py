"""Model zoo: real ``torch.nn`` models cut into consecutive layers, for the emulator and profiler.

Every model is a :class:`~raytestbed.models.base.LayeredModel`: an ordered list of
layers (each an ``nn.Module`` taking the previous layer's output), a synthetic
input batch, a synthetic target and a loss. A pipeline stage is a contiguous layer
range (``model.stage(start, end)``). Weights are random (seeded); nothing is
downloaded. Presets are listed in :data:`PRESETS` (``raytestbed profile --list``).
"""

from raytestbed.models.base import LayeredModel
from raytestbed.models.zoo import PRESETS, build_model

__all__ = ["LayeredModel", "PRESETS", "build_model"]
