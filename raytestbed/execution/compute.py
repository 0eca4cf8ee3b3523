"""Compute strategies: what a worker's passes cost and what its transfers carry.

Workers of a job on GPUs of different types each compute at their own type's speed; a step that
waits for every replica (an all-reduce, the next stage's input) then runs at the slowest one's: the
slowest-type rule of :class:`~raytestbed.core.gpu_types.TypedModel` emerges.

A :class:`~raytestbed.execution.driver.Driver` owns one strategy per worker (or parameter server);
the worker program (:mod:`raytestbed.execution.worker_program`) is the same whatever the strategy.

* :class:`ReplayCompute`: each pass is charged its profiled seconds p^f / p^b divided by the speed
  factor of the worker's GPU type (``spec.speed``), times the simulator's ``scale``; transfers have
  the profiled sizes (A-SRPT §III-B: A_s / (k_s k_{s+1}) activation bytes per slice, h/k bytes per
  ring chunk, h / #PS per PS shard) and carry zero buffers standing for them (at most
  ``replay_payload_bytes``; none at all in the simulator). With ``noise`` (the simulator's
  ``timing.compute_noise``) each charge is multiplied by a draw of mean 1 (:func:`lognormal_noise`):
  the pass-to-pass jitter real compute has, on the simulator's clock.
* :class:`RealCompute`: the passes run a stage's layers on real tensors (a
  :class:`~raytestbed.emu.executors.compute.RealStage`, built by the emulator) and are charged
  their measured time at the emulated GPU's speed, divided by the speed factor of its type;
  transfers carry the real arrays (numpy): activation slices cut by sample, gradient slices cut as
  the activations came in, ring chunks summed step by step, PS shards summed by the PS, and the SGD
  step applies the summed gradient.

Every method is called by the driver: ``compute(kind, i) -> Charge``; ``outbound((what, i,
part)) -> (payload, meta, nbytes)``; ``received(request, data)`` with the ``(payload, meta)`` of a
:class:`~raytestbed.execution.worker_program.Receive` or
:class:`~raytestbed.execution.worker_program.Exchange` (None where the backend moves no data);
``split(i, parts) -> sizes``; ``sum_shards(i) -> gradient bytes``; ``apply(i)``; ``loss(i) ->
(loss, samples)``. Units: seconds, bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from raytestbed.execution.plan import split_sizes


class Charge(NamedTuple):
    """Emulated seconds a pass holds the GPU, the profiled seconds it stands for on this GPU (the
    profile / the type's speed factor) and the CPU seconds it took (0 in replay)."""

    seconds: float
    profiled_s: float
    cpu_s: float = 0.0


def lognormal_noise(cv: float, seed) -> Callable[[], float]:
    """Multiplicative noise of mean 1 and coefficient of variation ``cv``: a lognormal with
    sigma^2 = ln(1 + cv^2) and mu = -sigma^2 / 2, drawn from ``numpy.random.default_rng(seed)``
    (``seed``: an int or a sequence of ints)."""
    rng = np.random.default_rng(seed)
    sigma = float(np.sqrt(np.log1p(cv * cv)))
    return lambda: float(rng.lognormal(-sigma * sigma / 2.0, sigma))


class ReplayCompute:
    """Profiled charges and sizes (module docstring).

    Args:
        spec: a :class:`~raytestbed.execution.plan.WorkerSpec` or :class:`~raytestbed.execution.plan.PsSpec`.
        scale: each mini-batch stands for this many (the simulator's ``iterations_per_coflow``:
            compute charged ``scale`` times; the driver's backend scales the bytes).
        payloads: move zero buffers (the emulator) or nothing (the simulator).
        noise: a factor per pass (:func:`lognormal_noise`) the charge is multiplied by; None: none.
    """

    def __init__(self, spec, scale: int = 1, payloads: bool = True,
                 noise: Callable[[], float] | None = None) -> None:
        self.spec = spec
        self.scale = scale
        self.payloads = payloads
        self.noise = noise
        self._cap = getattr(spec, "replay_payload_bytes", None)
        self._zeros: dict[int, np.ndarray] = {}
        self._pieces: dict[int, list[int]] = {}

    def compute(self, kind: str, i: int) -> Charge:
        p = (self.spec.profile.fwd_s if kind == "fwd" else self.spec.profile.bwd_s) / self.spec.speed
        return Charge(p * self.scale * (self.noise() if self.noise is not None else 1.0), p)

    def outbound(self, data: tuple):
        what, i, part = data
        if what == "act":
            n = self.spec.act_out_bytes
        elif what == "grad":
            n = self.spec.act_in_bytes
        elif what == "sum":
            n = self.spec.shard_bytes
        else:  # a ring chunk or a PS shard
            sizes = self._pieces[i]
            n = sizes[part]
            if what == "shard":
                return self._buffer(n), {"gradient_bytes": sum(sizes)}, n
        return self._buffer(n), None, n

    def _buffer(self, nbytes: int) -> np.ndarray | None:
        """A payload standing for ``nbytes`` bytes: zeros, read-only, one per size, reused; at most
        ``replay_payload_bytes`` (the network charges ``nbytes`` whatever moves)."""
        if not self.payloads:
            return None
        nbytes = int(nbytes if self._cap is None else min(nbytes, self._cap))
        buf = self._zeros.get(nbytes)
        if buf is None:
            buf = self._zeros[nbytes] = np.zeros(nbytes, dtype=np.uint8)
            buf.flags.writeable = False
        return buf

    def received(self, request, data) -> None:
        """Replayed payloads carry nothing to keep."""

    def split(self, i: int, parts: int) -> list[int]:
        sizes = self._pieces[i] = split_sizes(int(self.spec.profile.param_bytes), parts)
        return sizes

    def sum_shards(self, i: int) -> int:
        return self.spec.num_ps * self.spec.shard_bytes

    def apply(self, i: int) -> None:
        self._pieces.pop(i, None)

    def loss(self, i: int) -> tuple[None, int]:
        return None, 0


class RealCompute:
    """Real tensors (module docstring).

    Args:
        spec: the worker's (or PS's) spec.
        stage: a worker's real stage (``forward``, ``backward``, ``flat_grad``, ``apply``,
            ``first_shard``, ``timer``); None for a PS.
        charges: ``charge(kind, cpu_s) -> emulated s``
            (:class:`~raytestbed.emu.executors.compute.ComputeCharge`); None for a PS.
    """

    def __init__(self, spec, stage=None, charges=None) -> None:
        self.spec = spec
        self.stage = stage
        self.charges = charges
        self._inputs: dict[int, tuple] = {}  # i -> (activations, sample indices) of forward i
        self._cuts: dict[int, list[int]] = {}  # i -> samples of each upstream slice (gradients go back so)
        self._grad_out: dict[int, np.ndarray] = {}  # i -> gradient w.r.t. our output (from downstream)
        self._out: dict[tuple, list] = {}  # (what, i) -> [(payload, meta), ...] to send
        self._pieces: dict[int, tuple[list, list[int]]] = {}  # i -> (chunks or shards, their sizes)
        self._synced: dict[int, np.ndarray] = {}  # i -> the summed gradient (PS pull)
        self._loss: dict[int, tuple[float, int]] = {}
        self._pushed: dict[int, list] = {}  # PS: i -> the workers' (shard, meta)
        self._sum: tuple[int, np.ndarray] | None = None  # PS: (i, the sum of its shards)

    # ------------------------------------------------------------- passes
    def compute(self, kind: str, i: int) -> Charge:
        """Run pass ``kind`` of the stage and charge its time — thread CPU time, or CUDA event time on
        a GPU, as the profiler measures (:mod:`raytestbed.profile.timers`) — at the emulated GPU's speed:
        the charge for the profile's GPU (:class:`~raytestbed.emu.executors.compute.ComputeCharge`)
        divided by the speed factor of this GPU's type."""
        sp, stage = self.spec, self.stage
        if kind == "fwd":
            x, idx = self._inputs.pop(i) if sp.stage > 0 else (None, stage.first_shard())
            (out, loss), cpu = stage.timer.time(stage.forward, i, x, idx)
            if loss is not None:
                self._loss[i] = (loss, len(idx))
            if sp.next_gpus:
                k = len(sp.next_gpus)
                self._out[("act", i)] = [(p, {"idx": q}) for p, q in zip(np.array_split(out, k),
                                                                        np.array_split(idx, k))]
            profiled = sp.profile.fwd_s
        else:
            gin, cpu = stage.timer.time(stage.backward, i, self._grad_out.pop(i, None))
            cuts = self._cuts.pop(i, None)
            if sp.prev_gpus:
                self._out[("grad", i)] = [(p, None) for p in np.split(gin, np.cumsum(cuts)[:-1])]
            profiled = sp.profile.bwd_s
        return Charge(self.charges.charge(kind, cpu) / sp.speed, profiled / sp.speed, cpu)

    # ------------------------------------------------------------- payloads
    def outbound(self, data: tuple):
        what, i, part = data
        if what in ("act", "grad"):
            payload, meta = self._out[(what, i)][part]
            return payload, meta, payload.nbytes
        if what == "sum":
            return self._sum[1], None, self._sum[1].nbytes
        pieces, sizes = self._pieces[i]  # a ring chunk or a PS shard
        return pieces[part], ({"gradient_bytes": sum(sizes)} if what == "shard" else None), sizes[part]

    def received(self, request, data) -> None:
        what = getattr(request, "what", "chunk")
        i = request.i
        if what == "act":
            self._inputs[i] = (np.concatenate([p for p, _ in data]), np.concatenate([m["idx"] for _, m in data]))
            self._cuts[i] = [len(m["idx"]) if m else 0 for _, m in data]
        elif what == "grad":
            self._grad_out[i] = np.concatenate([p for p, _ in data])
        elif what == "pull":
            self._synced[i] = np.concatenate([p for p, _ in data])
        elif what == "push":
            self._pushed[i] = data
        else:  # a ring step: reduce-scatter adds the chunk to ours, all-gather takes it
            chunks = self._pieces[i][0]
            payload = data[0][0]
            chunks[request.chunk] = np.array(payload) if request.gather else chunks[request.chunk] + payload

    # ------------------------------------------------------------- gradient synchronisation
    def split(self, i: int, parts: int) -> list[int]:
        chunks = [c.copy() for c in np.array_split(self.stage.flat_grad(i), parts)]
        sizes = [c.nbytes for c in chunks]
        self._pieces[i] = (chunks, sizes)
        return sizes

    def sum_shards(self, i: int) -> int:
        got = self._pushed.pop(i)
        self._sum = (i, np.sum(np.stack([d for d, _ in got]), axis=0))
        return (got[0][1] or {}).get("gradient_bytes", 0)

    def apply(self, i: int) -> None:
        """The SGD step with the synchronised gradient (flattening and the step are not charged:
        profiles time forward and backward only)."""
        self._out.pop(("act", i), None)
        self._out.pop(("grad", i), None)
        pieces = self._pieces.pop(i, None)
        if i in self._synced:
            total = self._synced.pop(i)
        elif pieces is not None:
            total = np.concatenate(pieces[0])
        else:
            total = self.stage.flat_grad(i)
        self.stage.apply(total)

    def loss(self, i: int) -> tuple[float | None, int]:
        return self._loss.pop(i, (None, 0))
