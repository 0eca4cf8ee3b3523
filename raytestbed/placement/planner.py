"""Pipeline planner: several (stages, replicas) configurations of a model on g GPUs.

A-SRPT takes each job's parallel configuration as given, "derived from the
planner proposed in [20], which calculates multiple configurations per model"
(A-SRPT §V-A-1-b; [20] = PipeDream, Narayanan et al., SOSP'19). This module is a
PipeDream-style dynamic program over a per-layer profile
(:class:`~raytestbed.core.profile.ModelProfile`, the shipped
``workloads/profiles/*.json``, or the on-machine profiler's output).

Method (PipeDream §3.1, one bandwidth level):

* The model's layers are first merged into at most ``max_blocks`` consecutive
  blocks of balanced compute (:meth:`ModelProfile.even_split`); cuts are only
  made between blocks. This bounds the DP for models with 1,000+ layers.
* A stage = a run of consecutive blocks i..j with m data-parallel replicas. Its
  time per mini-batch is ``T(i, j, m) = max(C, AR) / m`` with C = sum of
  forward + backward seconds, AR = 2 (m - 1) h / (m B) the all-reduce time of
  its h parameter bytes (the A-SRPT eq. (6) volume), B the planning bandwidth.
  m replicas work on m mini-batches at once, hence the division by m.
* A cut after block i costs ``2 a_i / B`` (activations forward, gradients back;
  a_i = bytes crossing the cut, eq. (5) volume).
* ``F[s][j][m]`` = least bottleneck time of blocks 0..j in exactly s stages on
  exactly m GPUs = min over the last stage's first block i+1 and its replicas
  m' of ``max(F[s-1][i][m-m'], 2 a_i / B, T(i+1, j, m'))``.
* One configuration per stage count S = 1 .. min(g, blocks, ``max_stages``): the
  optimum of ``F[S][last][g]`` (all g GPUs are used: the trace fixes g_i). The
  list is sorted by that bottleneck time (fastest first); S = 1 is pure data
  parallelism, S = g with one replica each is pure model parallelism.

Units: seconds, bytes, bytes/s. ``planning_bandwidth`` gives the B used by the
workload builders: B_intra when the job fits one server, else the NIC share of
one GPU, B_inter / g (A-SRPT §III-A reserves x/g of the NIC per x GPUs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from raytestbed.core.job import Stage
from raytestbed.core.profile import ModelProfile


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """A parallel configuration of one model.

    Attributes:
        model: model name of the profile it was planned for.
        boundaries: first layer index of every stage (``boundaries[0] == 0``).
        replicas: k_s, data-parallel replicas of every stage (sum = GPUs).
        est_time_s: the planner's bottleneck time per mini-batch (seconds), the
            quantity the DP minimises; for ranking only (the simulator uses eq. 7).
    """

    model: str
    boundaries: tuple[int, ...]
    replicas: tuple[int, ...]
    est_time_s: float

    @property
    def gpus(self) -> int:
        return sum(self.replicas)

    @property
    def num_stages(self) -> int:
        return len(self.replicas)

    def stages(self, profile: ModelProfile) -> tuple[Stage, ...]:
        """The job stages (per-stage profiles with replicas) of this configuration."""
        return tuple(Stage(k, sp) for k, sp in zip(self.replicas, profile.stage_profiles(list(self.boundaries))))


def planning_bandwidth(gpus: int, gpus_per_server: int, b_inter: float, b_intra: float) -> float:
    """Bandwidth B (bytes/s) the DP assumes for a g-GPU job (see the module docstring)."""
    return b_intra if gpus <= gpus_per_server else b_inter / gpus_per_server


def plan_configs(profile: ModelProfile, gpus: int, bandwidth_bps: float, max_stages: int = 8,
                 max_blocks: int = 32) -> list[PipelineConfig]:
    """All per-stage-count optimal configurations of ``profile`` on exactly ``gpus`` GPUs, fastest first.

    Args:
        profile: per-layer profile.
        gpus: g_i >= 1.
        bandwidth_bps: planning bandwidth B (> 0), see :func:`planning_bandwidth`.
        max_stages: largest stage count tried.
        max_blocks: layers are merged into at most this many balanced blocks first.
    """
    if gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")
    if not bandwidth_bps > 0:
        raise ValueError(f"bandwidth must be > 0, got {bandwidth_bps}")
    return list(_plan_cached(profile, int(gpus), float(bandwidth_bps), int(max_stages), int(max_blocks)))


@lru_cache(maxsize=4096)
def _plan_cached(profile: ModelProfile, gpus: int, bw: float, max_stages: int,
                 max_blocks: int) -> tuple[PipelineConfig, ...]:
    nb = min(max_blocks, profile.num_layers)
    starts = profile.even_split(nb) if nb < profile.num_layers else list(range(profile.num_layers))
    blocks = profile.stage_profiles(starts)
    n = len(blocks)
    comp = np.array([b.compute_s for b in blocks])
    par = np.array([b.param_bytes for b in blocks])
    cut = np.array([2.0 * b.out_bytes / bw for b in blocks])  # cost of a cut after block i
    pc = np.concatenate([[0.0], np.cumsum(comp)])
    pp = np.concatenate([[0.0], np.cumsum(par)])
    ms = np.arange(1, gpus + 1, dtype=float)

    def stage_time(i: int, j: int) -> np.ndarray:
        """T(i..j, m) for m = 1..gpus (index m-1)."""
        c = pc[j + 1] - pc[i]
        h = pp[j + 1] - pp[i]
        ar = 2.0 * (ms - 1.0) * h / (ms * bw)
        return np.maximum(c, ar) / ms

    smax = min(gpus, n, max_stages)
    inf = math.inf
    # F[s][j] = vector over m (index m, 0..gpus) ; choice[s][j][m] = (i, m')
    F: list[list[np.ndarray]] = [[np.full(gpus + 1, inf) for _ in range(n)] for _ in range(smax + 1)]
    choice: list[list[np.ndarray]] = [[np.zeros((gpus + 1, 2), dtype=np.int64) for _ in range(n)]
                                      for _ in range(smax + 1)]
    for j in range(n):
        F[1][j][1:] = stage_time(0, j)
    # index helpers for the (max, min) convolution over m' (replicas of the last stage)
    mm = np.arange(gpus + 1)[:, None]           # total m
    mp = np.arange(1, gpus + 1)[None, :]        # m' of the last stage
    rest = mm - mp                              # GPUs left for the first s-1 stages
    valid = rest >= 1
    rest_idx = np.where(valid, rest, 0)
    for s in range(2, smax + 1):
        for j in range(s - 1, n):
            best = np.full(gpus + 1, inf)
            arg = np.zeros((gpus + 1, 2), dtype=np.int64)
            for i in range(s - 2, j):
                prev = F[s - 1][i]
                if not np.isfinite(prev).any():
                    continue
                t_last = stage_time(i + 1, j)  # over m' = 1..gpus
                cand = np.maximum(np.maximum(prev[rest_idx], t_last[None, :]), cut[i])
                cand = np.where(valid, cand, inf)
                k = np.argmin(cand, axis=1)
                val = cand[np.arange(gpus + 1), k]
                better = val < best
                best = np.where(better, val, best)
                arg[better, 0] = i
                arg[better, 1] = k[better] + 1
            F[s][j] = best
            choice[s][j] = arg
    out: list[PipelineConfig] = []
    for s in range(1, smax + 1):
        t = F[s][n - 1][gpus]
        if not math.isfinite(t):
            continue
        bounds: list[int] = []
        reps: list[int] = []
        j, m = n - 1, gpus
        for ss in range(s, 1, -1):
            i, mprime = (int(v) for v in choice[ss][j][m])
            bounds.append(i + 1)
            reps.append(mprime)
            j, m = i, m - mprime
        bounds.append(0)
        reps.append(m)
        bounds.reverse()
        reps.reverse()
        layer_bounds = tuple(int(starts[b]) for b in bounds)
        out.append(PipelineConfig(profile.model, layer_bounds, tuple(reps), float(t)))
    out.sort(key=lambda c: (c.est_time_s, c.num_stages))
    return tuple(out)
