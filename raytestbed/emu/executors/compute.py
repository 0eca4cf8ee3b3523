"""Real compute of one stage replica: a contiguous layer range of a zoo model.

:class:`RealStage` runs forward and backward of its layers on real tensors
(one torch thread: one emulated GPU per host core). The job's fixed synthetic
mini-batch of ``global_batch`` samples (the profiled batch B) is sharded sample-wise: stage-0
replica r takes shard r of k_0; every later replica receives, from each upstream replica, the
slice of its samples that the upstream replica cut for it (sample indices
travel with the activations, so the last stage knows its targets). So a replica of stage s
computes B / k_s samples and each replica pair moves A_s / (k_s k_{s+1}) activation bytes, the
model's per-replica volume (:meth:`raytestbed.core.job.Job.pair_bytes`).

The loss of a shard of n samples out of G is scaled by n / G, so the SUM of the
replicas' gradients (what the ring all-reduce computes) is exactly the gradient
of the mean loss over the whole batch.

PipeDream weight stashing: a stage with more than one mini-batch in flight runs
each forward on a snapshot of its parameters (``torch.func.functional_call``)
and the matching backward uses that snapshot, so optimizer steps in between do
not invalidate saved tensors.
"""

from __future__ import annotations

import statistics

import numpy as np
import torch
from torch.func import functional_call

from raytestbed.execution.plan import WorkerSpec
from raytestbed.models import build_model
from raytestbed.profile.timers import make_timer


def _rows(make, n: int) -> torch.Tensor:
    """``make(n)``, rows repeated cyclically when the preset holds fewer than n samples."""
    x = make(n)
    if x.shape[0] < n:
        reps = -(-n // x.shape[0])
        x = torch.cat([x] * reps)[:n]
    return x


class ComputeCharge:
    """Emulated seconds charged for a real forward or backward pass of one stage replica.

    With a fixed ``factor`` (emulated GPU seconds per CPU second, set in the trial): ``cpu_s x factor``.
    Else the pass is charged its stage's profiled seconds times ``recent / typical``: ``recent`` is the
    median CPU seconds of this worker's last ``smooth`` passes of that kind (a one-off spike of the
    host — a context switch, a cold cache — is filtered out; a change that lasts shows within
    ``smooth // 2 + 1`` passes and fades as ``typical`` takes it in, within ``window`` passes),
    ``typical`` the median of its last ``window`` passes. Both come
    from the run's own passes (``samples`` seeds the window, for tests): CPU seconds measured
    outside the run — a stage timed alone, with warm caches — differ from a run's by several per
    cent and would bias every charge until the window has forgotten them. So the charges follow
    the profile on average whatever the host's speed and load (docs/emulator.md, "Real compute").

    Start-up: a run's first ``cold`` passes of each kind are charged the profile and kept out of the
    window. The first pass builds what later passes reuse (autograd buffers, the allocator's pages),
    at 2-5x their CPU time; in a window of a few passes its weight in the median would charge the
    next passes as a faster stage (several per cent below the profile for the window's length).
    """

    def __init__(self, profiled: dict[str, float], samples: dict[str, list[float]] | None = None,
                 factor: float | None = None, window: int = 16, smooth: int = 3, cold: int = 1) -> None:
        self.profiled = profiled
        self.factor = factor
        self.window = window
        self.smooth = smooth
        self.samples = {k: list(v)[-window:] for k, v in (samples or {}).items()}
        self._cold = {k: (0 if k in self.samples else cold) for k in profiled}

    def charge(self, kind: str, cpu_s: float) -> float:
        if self.factor is not None:
            return cpu_s * self.factor
        if self._cold.get(kind, 0) > 0:
            self._cold[kind] -= 1
            return self.profiled[kind]
        xs = self.samples.setdefault(kind, [])
        xs.append(cpu_s)
        del xs[:-self.window]
        typical = statistics.median(xs)
        recent = statistics.median(xs[-self.smooth:])
        return self.profiled[kind] * recent / typical if typical > 0 else self.profiled[kind]


class RealStage:
    """Layers ``spec.layers`` of ``spec.model`` with random (seeded) weights, on ``spec.device``.

    ``timer`` times a pass as the profiler does (:mod:`raytestbed.profile.timers`): thread CPU time
    on the CPU, CUDA event time on a GPU. Tensors cross to other workers as CPU numpy arrays; on a GPU
    the copies to and from the device are inside the timed pass.
    """

    def __init__(self, spec: WorkerSpec) -> None:
        torch.set_num_threads(1)
        choice = make_timer(spec.device)
        self.timer, self.device, self.device_note = choice.timer, choice.device, choice.note
        model = build_model(spec.model, seed=spec.seed)
        start, end = spec.layers
        end = model.num_layers if end < 0 else end
        self.spec = spec
        self.first = start == 0
        self.last = end == model.num_layers
        self.module = model.stage(start, end).to(self.device)
        self.module.train()
        self.names = [n for n, p in self.module.named_parameters() if p.requires_grad]
        self.params = [p for p in self.module.parameters() if p.requires_grad]
        self.global_batch = spec.global_batch or model.batch_size * -(-max(spec.replicas) // model.batch_size)
        self.loss_fn = model.loss
        self.stash_weights = spec.in_flight > 1
        self._inputs = _rows(model.make_input, self.global_batch).to(self.device) if self.first else None
        self._targets = _rows(model.make_target, self.global_batch).to(self.device) if self.last else None
        self._saved: dict[int, tuple] = {}
        self._grads: dict[int, list[torch.Tensor | None]] = {}

    @property
    def param_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.params)

    def first_shard(self) -> np.ndarray:
        """Sample indices of this stage-0 replica's shard of the global batch."""
        k0 = self.spec.replicas[0]
        return np.array_split(np.arange(self.global_batch), k0)[self.spec.replica]

    def forward(self, i: int, x: np.ndarray | None, idx: np.ndarray) -> tuple[np.ndarray | None, float | None]:
        """Forward of mini-batch ``i`` on samples ``idx``; returns (output as numpy, loss) .

        The last stage returns (None, mean loss of its samples) and keeps the
        scaled loss for :meth:`backward`; other stages return their output.
        """
        if self.first:
            inp = self._inputs[torch.from_numpy(idx).to(self.device)]
        else:
            inp = torch.from_numpy(x).to(self.device).requires_grad_(True)
        if self.stash_weights:
            params = {n: p.detach().clone().requires_grad_(True) for n, p in zip(self.names, self.params)}
        else:
            params = dict(zip(self.names, self.params))
        out = functional_call(self.module, params, (inp,))
        loss_val = None
        if self.last:
            loss = self.loss_fn(out, self._targets[torch.from_numpy(idx).to(self.device)])
            loss_val = float(loss.detach())
            out = loss * (len(idx) / self.global_batch)
            result = None
        else:
            result = out.detach().cpu().numpy()
        self._saved[i] = (inp, out, params)
        return result, loss_val

    def backward(self, i: int, grad_out: np.ndarray | None) -> np.ndarray | None:
        """Backward of mini-batch ``i``; returns the gradient w.r.t. the stage input (None on stage 0)."""
        inp, out, params = self._saved.pop(i)
        if grad_out is None:
            out.backward()
        else:
            out.backward(torch.from_numpy(grad_out).to(self.device))
        grads = []
        for n in self.names:
            p = params[n]
            grads.append(p.grad.detach().clone() if p.grad is not None else None)
            p.grad = None
        self._grads[i] = grads
        if self.first:
            return None
        return inp.grad.detach().cpu().numpy()

    def flat_grad(self, i: int) -> np.ndarray:
        """Mini-batch ``i``'s parameter gradients as one float32 vector (zeros where none)."""
        grads = self._grads.pop(i)
        parts = [(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, self.params)]
        if not parts:
            return np.zeros(0, dtype=np.float32)
        return torch.cat(parts).cpu().numpy()

    def apply(self, flat: np.ndarray) -> None:
        """SGD step with the summed gradient ``flat``: p -= lr * g."""
        off = 0
        with torch.no_grad():
            for p in self.params:
                n = p.numel()
                p.add_(torch.from_numpy(np.asarray(flat[off:off + n], dtype=np.float32)).to(p.device).view_as(p),
                       alpha=-self.spec.lr)
                off += n

    def flat_params(self) -> np.ndarray:
        with torch.no_grad():
            return torch.cat([p.reshape(-1) for p in self.params]).cpu().numpy().copy()
