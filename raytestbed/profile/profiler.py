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
core), on a CUDA device the seconds between CUDA events. Each is a median after ``warmup``
iterations: on the CPU over the *warm* runs of the pass, those in which the thread ran with no
involuntary switch since the same pass one iteration earlier began (a switch costs a cache refill, to
the pass it interrupts and to the passes after it, that a busy host adds and a quiet one does not),
when at least a third of ``repeats`` were warm, else over the runs not switched out during the pass,
else over all of them. The profiler runs at least ``repeats`` iterations, and more while some pass
has fewer than ``repeats`` warm runs and the measured passes took less than ``max_time_s`` seconds.
The spread (interquartile range / median) of every layer and of the whole iteration is kept in the
profile's ``measurement`` with the device, torch version, threads, the rule each pass's median used
and the host's load, and the profile says it is noisy when the layers' spread (weighted by their
times) exceeds ``spread_limit`` or the host ran more runnable processes than it has cores.
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
MAX_TIME_S = 10.0  #: measured seconds after which the profiler stops running iterations for more warm runs


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


def _iterations(model: LayeredModel, x0, target, timer, warmup: int, repeats: int, max_time_s: float):
    """Run whole iterations, every layer's forward then every backward, each pass timed alone.

    Returns ``(fwd, bwd, out_bytes)``: ``fwd[i]`` / ``bwd[i]`` hold one ``(seconds, switches before,
    switches after)`` per iteration of layer i's pass, the ``warmup`` iterations first. After the
    warm-up it runs at least ``repeats`` iterations, and more while some pass has fewer than
    ``repeats`` warm runs (:func:`_warm`) and the measured passes' time is below ``max_time_s``.
    """
    n = model.num_layers
    fwd: list[list[tuple[float, int, int]]] = [[] for _ in range(n)]
    bwd: list[list[tuple[float, int, int]]] = [[] for _ in range(n)]
    out_bytes = [0] * n
    spent, rep = 0.0, 0
    warm = [0] * (2 * n)  # warm measured runs so far, per pass (fwd then bwd)
    while True:
        if rep >= warmup + repeats and (spent >= max_time_s or min(warm) >= repeats):
            break
        saved = []
        cur = x0
        for i, layer in enumerate(model.layers):
            inp = cur.detach()
            if inp.is_floating_point():
                inp.requires_grad_(True)

            def step(layer=layer, inp=inp, last=(i == n - 1)):
                out = layer(inp)
                return model.loss(out, target) if last else out

            out, run = _timed(timer, step)
            fwd[i].append(run)
            if i < n - 1:
                out_bytes[i] = _nbytes(out)
            saved.append((inp, out))
            cur = out
        grad = None
        for i in range(n - 1, -1, -1):
            inp, out = saved[i]
            _, run = _timed(timer, out.backward, None if i == n - 1 else grad)
            bwd[i].append(run)
            grad = inp.grad
        model.layers.zero_grad(set_to_none=True)
        if rep >= warmup:
            runs = fwd + bwd
            spent += math.fsum(r[-1][0] for r in runs)
            if rep > 0:
                warm = [w + _warm_after(r[-2], r[-1]) for w, r in zip(warm, runs)]
        rep += 1
    return fwd, bwd, out_bytes


def _timed(timer, fn, *args):
    """``(fn(*args), (seconds, switches before, switches after))``, timed by ``timer``."""
    s0 = timer.switch_count()
    out, dt = timer.time(fn, *args)
    return out, (dt, s0, timer.switch_count())


def _warm_after(prev: tuple[float, int, int], run: tuple[float, int, int]) -> bool:
    """No involuntary switch from the start of ``prev`` (the pass one iteration earlier) to the end of ``run``."""
    return run[2] == prev[1]


def _warm(runs: list[tuple[float, int, int]]) -> list[bool]:
    """Per run of one pass, ``(seconds, switches before, switches after)``: did the thread run with no
    involuntary switch from the start of the same pass one iteration earlier to the end of this one?

    Then the pass found the caches as a whole iteration on its own leaves them, as on a quiet host. A
    switch costs a refill not only to the pass it interrupts but to the passes after it: on a 2-core
    host beside two busy processes a time slice is about one iteration of a model whose passes take a
    millisecond (mlp-tiny), and its passes read ~20 % slower though the switch fell into none of them
    (and still ~15 % slower when only the switches since each layer's previous pass are left out).
    """
    return [k > 0 and _warm_after(runs[k - 1], runs[k]) for k in range(len(runs))]


def _select(runs: list[tuple[float, int, int]], warmup: int, need: int) -> tuple[list[float], str]:
    """The measured runs a pass's statistic uses, and which: ``warm`` (:func:`_warm`) where at least
    ``need`` were, else ``unswitched`` (no involuntary switch inside the pass) where at least ``need``
    were, else ``all``."""
    warm = _warm(runs)[warmup:]
    runs = runs[warmup:]
    chosen = [r[0] for r, w in zip(runs, warm) if w]
    if len(chosen) >= need:
        return chosen, "warm"
    chosen = [r[0] for r in runs if r[1] == r[2]]
    if len(chosen) >= need:
        return chosen, "unswitched"
    return [r[0] for r in runs], "all"


def profile_model(
    model: LayeredModel,
    batch_size: int | None = None,
    warmup: int = 3,
    repeats: int = 21,
    threads: int = 1,
    device: str = "cpu",
    spread_limit: float = SPREAD_LIMIT,
    max_time_s: float = MAX_TIME_S,
) -> ModelProfile:
    """Measure every layer of ``model``; returns a profile in the project's file format.

    ``device``: ``cpu``, ``cuda`` or ``auto`` (``cuda`` without a CUDA device measures on the CPU and
    says so in the profile's warnings). ``repeats``: measured iterations at least, and the warm runs
    each pass is measured for while the measured passes take less than ``max_time_s`` seconds in all.
    Times in seconds.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    if not max_time_s >= 0:
        raise ValueError("max_time_s must be >= 0")
    choice = make_timer(device)
    timer, dev = choice.timer, choice.device
    b = batch_size or model.batch_size
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    n = model.num_layers
    load_before = load_per_core()
    try:
        model.layers.to(dev)
        x0, target = _to(model.make_input(b), dev), _to(model.make_target(b), dev)
        fwd, bwd, out_bytes = _iterations(model, x0, target, timer, warmup, repeats, max_time_s)
    finally:
        torch.set_num_threads(old_threads)
        model.layers.to("cpu")
    load_after = load_per_core()
    need = max(1, -(-repeats // 3))
    fwd_sel = [_select(r, warmup, need) for r in fwd]
    bwd_sel = [_select(r, warmup, need) for r in bwd]
    fwd_kept = [x for x, _ in fwd_sel]
    bwd_kept = [x for x, _ in bwd_sel]
    measured = len(fwd[0]) - warmup
    totals = [math.fsum(fwd[i][warmup + r][0] + bwd[i][warmup + r][0] for i in range(n)) for r in range(measured)]
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
        "iterations": measured,
        "max_time_s": max_time_s,
        "statistic": "median",
        "spread": round(it_spread, 6),
        "iteration_spread_all_runs": round(raw_spread, 6),
        "spread_limit": spread_limit,
        "fwd_spread": [round(spread(x), 6) for x in fwd_kept],
        "bwd_spread": [round(spread(x), 6) for x in bwd_kept],
        "fwd_used": [len(x) for x in fwd_kept],
        "bwd_used": [len(x) for x in bwd_kept],
        "fwd_runs": [rule for _, rule in fwd_sel],
        "bwd_runs": [rule for _, rule in bwd_sel],
        "switched_out": sum(r[1] != r[2] for runs in fwd + bwd for r in runs[warmup:]),
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
                f"median of the warm runs of at least {repeats} iterations after {warmup} warm-up)"),
        device=dev_name,
        layers=layers,
        measurement=measurement,
    )
