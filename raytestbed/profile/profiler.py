"""Stage profiler: measure a layered model per layer into a :class:`ModelProfile` file.

For every layer i, on a fixed synthetic mini-batch (A-SRPT §III-A quantities):

* forward time p^f (seconds): the layer's forward on the previous layer's output
  (detached, so each layer is timed alone); the last layer's time includes the loss;
* backward time p^b (seconds): ``out.backward(grad)`` of that layer alone
  (input and weight gradients), with the gradient coming from the next layer;
* ``out_bytes``: bytes of the layer's output tensor = the activation that crosses a
  pipeline cut placed after it (the same number of gradient bytes flows back);
  0 for the last layer;
* ``param_bytes``: bytes of the layer's trainable parameters.

Times are the median over ``repeats`` runs after ``warmup`` runs, with
``torch.set_num_threads(threads)`` (one thread = one emulated GPU per core).
A stage's profile is the sum over its layers (:meth:`ModelProfile.stage_profiles`).
"""

from __future__ import annotations

import statistics
import time

import torch

from raytestbed.core.profile import LayerProfile, ModelProfile
from raytestbed.models.base import LayeredModel


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def profile_model(
    model: LayeredModel,
    batch_size: int | None = None,
    warmup: int = 2,
    repeats: int = 5,
    threads: int = 1,
) -> ModelProfile:
    """Measure every layer of ``model``; returns a profile in the project's file format."""
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    b = batch_size or model.batch_size
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    n = model.num_layers
    fwd: list[list[float]] = [[] for _ in range(n)]
    bwd: list[list[float]] = [[] for _ in range(n)]
    out_bytes = [0] * n
    try:
        x0, target = model.make_input(b), model.make_target(b)
        for rep in range(warmup + repeats):
            record = rep >= warmup
            saved = []
            cur = x0
            for i, layer in enumerate(model.layers):
                inp = cur.detach()
                if inp.is_floating_point():
                    inp.requires_grad_(True)
                t0 = time.perf_counter()
                out = layer(inp)
                if i == n - 1:
                    out = model.loss(out, target)
                t1 = time.perf_counter()
                if record:
                    fwd[i].append(t1 - t0)
                if i < n - 1:
                    out_bytes[i] = _nbytes(out)
                saved.append((inp, out))
                cur = out
            grad = None
            for i in range(n - 1, -1, -1):
                inp, out = saved[i]
                t0 = time.perf_counter()
                if i == n - 1:
                    out.backward()
                else:
                    out.backward(grad)
                t1 = time.perf_counter()
                if record:
                    bwd[i].append(t1 - t0)
                grad = inp.grad
            model.layers.zero_grad(set_to_none=True)
    finally:
        torch.set_num_threads(old_threads)
    layers = tuple(
        LayerProfile(
            name=model.layer_names[i],
            fwd_s=statistics.median(fwd[i]),
            bwd_s=statistics.median(bwd[i]),
            out_bytes=float(out_bytes[i]) if i < n - 1 else 0.0,
            param_bytes=float(model.parameter_bytes(i, i + 1)),
        )
        for i in range(n)
    )
    return ModelProfile(
        model=model.name,
        batch_size=b,
        source=f"raytestbed profiler (torch {torch.__version__}, float32, median of {repeats} after {warmup} warm-up)",
        device=f"cpu ({threads} thread{'s' if threads > 1 else ''})",
        layers=layers,
    )
