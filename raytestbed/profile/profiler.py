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

Times are what the emulator's real compute charges (:mod:`raytestbed.profile.timers`): on the CPU
the thread's CPU seconds with ``torch.set_num_threads(threads)`` (one thread = one emulated GPU per
core), on a CUDA device the seconds between CUDA events. Each is the median over ``repeats`` runs
after ``warmup`` runs — on the CPU over the runs in which the thread was not switched out
involuntarily, when at least a third of them were (a switch costs a cache refill that a busy
host adds and a quiet one does not), else over all of them; the spread (interquartile range / median) of every layer and of the whole
iteration is kept in the profile's ``measurement`` with the device, torch version, threads and the
host's load, and the profile says it is noisy when the layers' spread (weighted by their times)
exceeds ``spread_limit``
or the host ran more runnable processes than it has cores.
A stage's profile is the sum over its layers (:meth:`ModelProfile.stage_profiles`).
"""

from __future__ import annotations

import math
import os
import statistics

import numpy as np
import torch

from raytestbed.core.profile import LayerProfile, ModelProfile
from raytestbed.models.base import LayeredModel
from raytestbed.profile.timers import make_timer

SPREAD_LIMIT = 0.05  #: iteration spread (IQR / median) above which a profile is called noisy
LOAD_LIMIT = 1.0  #: 1-minute load average per core above which a CPU profile is called noisy


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def spread(xs) -> float:
    """Interquartile range / median of ``xs`` (0 for fewer than two values or a zero median)."""
    a = np.asarray(xs, dtype=float)
    if a.size < 2:
        return 0.0
    med = float(np.median(a))
    q1, q3 = np.percentile(a, [25, 75])
    return float(q3 - q1) / med if med > 0 else 0.0


def load_per_core() -> float | None:
    """The host's 1-minute load average divided by its cores (None where the OS does not say)."""
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except (AttributeError, OSError):
        return None


def _to(x, device: str):
    return x.to(device) if isinstance(x, torch.Tensor) else x


def profile_model(
    model: LayeredModel,
    batch_size: int | None = None,
    warmup: int = 3,
    repeats: int = 21,
    threads: int = 1,
    device: str = "cpu",
    spread_limit: float = SPREAD_LIMIT,
) -> ModelProfile:
    """Measure every layer of ``model``; returns a profile in the project's file format.

    ``device``: ``cpu``, ``cuda`` or ``auto`` (``cuda`` without a CUDA device measures on the CPU and
    says so in the profile's warnings). Times in seconds.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    choice = make_timer(device)
    timer, dev = choice.timer, choice.device
    b = batch_size or model.batch_size
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    n = model.num_layers
    fwd: list[list[float]] = [[] for _ in range(n)]
    bwd: list[list[float]] = [[] for _ in range(n)]
    fwd_sw: list[list[bool]] = [[] for _ in range(n)]  # was the pass switched out?
    bwd_sw: list[list[bool]] = [[] for _ in range(n)]
    out_bytes = [0] * n
    load_before = load_per_core()
    try:
        model.layers.to(dev)
        x0, target = _to(model.make_input(b), dev), _to(model.make_target(b), dev)
        for rep in range(warmup + repeats):
            record = rep >= warmup
            saved = []
            cur = x0
            for i, layer in enumerate(model.layers):
                inp = cur.detach()
                if inp.is_floating_point():
                    inp.requires_grad_(True)

                def step(layer=layer, inp=inp, last=(i == n - 1)):
                    out = layer(inp)
                    return model.loss(out, target) if last else out

                out, dt, sw = timer.measure(step)
                if record:
                    fwd[i].append(dt)
                    fwd_sw[i].append(sw)
                if i < n - 1:
                    out_bytes[i] = _nbytes(out)
                saved.append((inp, out))
                cur = out
            grad = None
            for i in range(n - 1, -1, -1):
                inp, out = saved[i]
                _, dt, sw = timer.measure(out.backward, None if i == n - 1 else grad)
                if record:
                    bwd[i].append(dt)
                    bwd_sw[i].append(sw)
                grad = inp.grad
            model.layers.zero_grad(set_to_none=True)
    finally:
        torch.set_num_threads(old_threads)
        model.layers.to("cpu")
    load_after = load_per_core()
    need = max(1, -(-repeats // 3))

    def kept(xs: list[float], sw: list[bool]) -> list[float]:
        clean = [x for x, s in zip(xs, sw) if not s]
        return clean if len(clean) >= need else xs

    fwd_kept = [kept(x, s) for x, s in zip(fwd, fwd_sw)]
    bwd_kept = [kept(x, s) for x, s in zip(bwd, bwd_sw)]
    totals = [math.fsum(fwd[i][r] + bwd[i][r] for i in range(n)) for r in range(repeats)]
    raw_spread = spread(totals)
    # the spread of what the profile states: the layers' spreads weighted by their medians
    meds = [statistics.median(x) for x in fwd_kept + bwd_kept]
    spreads = [spread(x) for x in fwd_kept + bwd_kept]
    it_spread = math.fsum(m * s for m, s in zip(meds, spreads)) / math.fsum(meds) if math.fsum(meds) > 0 else 0.0
    warnings = [choice.note] if choice.note else []
    if it_spread > spread_limit:
        warnings.append(f"noisy: the layers' time spread (IQR/median, weighted by time) is {it_spread:.1%}, "
                        f"above {spread_limit:.0%}")
    loads = [x for x in (load_before, load_after) if x is not None]
    if dev == "cpu" and loads and max(loads) > LOAD_LIMIT:
        warnings.append(f"host loaded: 1-minute load average {max(loads):.2f} per core (more runnable "
                        f"processes than cores); thread CPU time leaves waiting out, caches are shared")
    dev_name = (f"cpu ({threads} thread{'s' if threads > 1 else ''})" if dev == "cpu"
                else f"cuda ({torch.cuda.get_device_name()})")
    measurement = {
        "method": timer.method,
        "allocator": getattr(timer, "allocator", "n/a (GPU time)"),
        "device": dev,
        "torch": torch.__version__,
        "threads": threads,
        "warmup": warmup,
        "repeats": repeats,
        "statistic": "median",
        "spread": round(it_spread, 6),
        "iteration_spread_all_runs": round(raw_spread, 6),
        "spread_limit": spread_limit,
        "fwd_spread": [round(spread(x), 6) for x in fwd_kept],
        "bwd_spread": [round(spread(x), 6) for x in bwd_kept],
        "fwd_used": [len(x) for x in fwd_kept],
        "bwd_used": [len(x) for x in bwd_kept],
        "switched_out": sum(map(sum, fwd_sw)) + sum(map(sum, bwd_sw)),
        "cpus": os.cpu_count(),
        "load_per_core": [None if x is None else round(x, 3) for x in (load_before, load_after)],
        "noisy": any(w.startswith(("noisy", "host loaded")) for w in warnings),
        "warnings": warnings,
    }
    layers = tuple(
        LayerProfile(
            name=model.layer_names[i],
            fwd_s=statistics.median(fwd_kept[i]),
            bwd_s=statistics.median(bwd_kept[i]),
            out_bytes=float(out_bytes[i]) if i < n - 1 else 0.0,
            param_bytes=float(model.parameter_bytes(i, i + 1)),
        )
        for i in range(n)
    )
    return ModelProfile(
        model=model.name,
        batch_size=b,
        source=(f"raytestbed profiler (torch {torch.__version__}, float32, {timer.method}, "
                f"median of {repeats} after {warmup} warm-up)"),
        device=dev_name,
        layers=layers,
        measurement=measurement,
    )
