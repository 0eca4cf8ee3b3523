"""SJF-BCO's evaluation workload (``workload.kind: sjfbco``).

160 ring-all-reduce jobs by default: 80 x 1, 14 x 2, 26 x 4, 30 x 8, 8 x 16 and
2 x 32 GPUs [SB §7-1]. Per job, eq. (8)'s physical inputs are built so that the
paper's stated ranges hold:

* estimated execution time rho^_j = F_j tau_j in ``rho_range`` = [50, 300] s;
* per-iteration compute tau0_j = FP + BP in ``tau_range`` = [0.01, 0.05] s
  (one slot = one second), F_j in ``iterations_range`` = [1000, 6000];
* gradient bytes m_j such that the ring exchange of a job split over servers,
  alone on the links (k = 1, B = b^e), takes ``comm_fraction`` x tau0_j
  (impl.: the paper gives no m_j; with the default 0.025 and eq. (8)'s linear
  degradation f = 2k - 1 a split job sees +2.5 % at k = 1, +7.5 % at k = 2,
  +12.5 % at k = 3, within the paper's "at most 15 %" for k <= 3).

``durations``:

* ``philly`` (default): for each GPU size, jobs of that size are sampled from the
  Microsoft Philly trace (``philly-jobs-rfold/philly_trace.csv``); a job's
  duration quantile among all Philly durations is mapped log-uniformly onto
  ``rho_range`` ("scaling down the original job trace following the job-type
  distribution", [SB §7-1]); tau0_j is then drawn uniformly from the part of
  ``tau_range`` compatible with ``iterations_range``.
* ``uniform``: a replication recipe: tau0 ~ U(tau_range),
  F ~ U{iterations_range}, resampled until tau0 F lies in ``rho_range``.

``arrivals``: ``batch`` (all at t = 0, the paper's offline setting) or ``philly``
(consecutive inter-arrival gaps of the Philly trace from a random offset, times
``arrival_scale``; for the online re-plan mode).

The Philly data directory is ``data_dir`` if given, else the data folder of
:mod:`raytestbed.traces.datadir`. The Philly rows are read by
:func:`raytestbed.traces.philly.read_philly`, so a bad cell is the same one-line error.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, PositiveFloat, field_validator

from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.errors import ConfigError
from raytestbed.traces.datadir import data_file
from raytestbed.traces.philly import read_philly
from raytestbed.traces.registry import LoaderParams, WorkloadContext, parse_params, register_workload

PAPER_MIX = {1: 80, 2: 14, 4: 26, 8: 30, 16: 8, 32: 2}  #: GPUs -> jobs [SB §7-1]
PHILLY_FILE = Path("philly-jobs-rfold") / "philly_trace.csv"


class SjfbcoWorkloadParams(LoaderParams):
    kind: str = "sjfbco"
    mix: dict[int, int] = Field(default_factory=lambda: dict(PAPER_MIX))
    durations: Literal["philly", "uniform"] = "philly"
    arrivals: Literal["batch", "philly"] = "batch"
    arrival_scale: PositiveFloat = 1.0
    rho_range: tuple[PositiveFloat, PositiveFloat] = (50.0, 300.0)
    tau_range: tuple[PositiveFloat, PositiveFloat] = (0.01, 0.05)
    iterations_range: tuple[int, int] = (1000, 6000)
    comm_fraction: float = Field(0.025, ge=0)
    data_dir: str | None = None

    @field_validator("mix")
    @classmethod
    def _mix(cls, v):
        if not v or any(g < 1 or n < 0 for g, n in v.items()) or sum(v.values()) < 1:
            raise ValueError("needs GPU sizes >= 1 with non-negative job counts, at least one job")
        return v

    @field_validator("rho_range", "tau_range", "iterations_range")
    @classmethod
    def _range(cls, v):
        if v[0] > v[1] or v[0] <= 0:
            raise ValueError("needs 0 < min <= max")
        return v


@lru_cache(maxsize=4)
def load_philly(path: str, mtime_ns: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(arrival s, GPUs, duration s) of every Philly job in the RFold CSV, in file order (cached per version)."""
    rows = read_philly(Path(path))
    return (np.array([r.arrival_s for r in rows], dtype=float), np.array([r.gpus for r in rows], dtype=np.int64),
            np.array([r.duration_s for r in rows], dtype=float))


def _tau_and_iterations(rng: np.random.Generator, rho: float, p: SjfbcoWorkloadParams) -> tuple[float, int]:
    lo = max(p.tau_range[0], rho / p.iterations_range[1])
    hi = min(p.tau_range[1], rho / p.iterations_range[0])
    if lo > hi:
        raise ConfigError(f"rho {rho:.1f} s cannot be tau x F within tau_range {p.tau_range} "
                          f"and iterations_range {p.iterations_range}")
    tau = float(rng.uniform(lo, hi))
    return tau, int(round(rho / tau))


def _philly_durations(rng, p: SjfbcoWorkloadParams, sizes: list[int], data: Path) -> list[tuple[float, int]]:
    path = data / PHILLY_FILE
    if not path.is_file():
        raise ConfigError(f"workload.durations: philly needs {path} (set data_dir or RAYTESTBED_DATA_DIR)")
    _, gpus, dur = load_philly(str(path), path.stat().st_mtime_ns)
    pos = dur > 0
    ranked = np.sort(dur[pos])
    lo, hi = p.rho_range
    out = []
    for g in sizes:
        pool = np.flatnonzero(pos & (gpus == g))
        if pool.size == 0:
            raise ConfigError(f"workload.mix: the Philly trace has no {g}-GPU jobs")
        d = dur[pool[int(rng.integers(pool.size))]]
        q = np.searchsorted(ranked, d, side="right") / ranked.size  # ECDF quantile in (0, 1]
        rho = lo * (hi / lo) ** q
        out.append(_tau_and_iterations(rng, rho, p))
    return out


def _uniform_durations(rng, p: SjfbcoWorkloadParams, n: int) -> list[tuple[float, int]]:
    lo, hi = p.tau_range[0] * p.iterations_range[0], p.tau_range[1] * p.iterations_range[1]
    if hi < p.rho_range[0] or lo > p.rho_range[1]:
        raise ConfigError(f"workload.rho_range: {list(p.rho_range)} s cannot be tau x F with tau_range "
                          f"{list(p.tau_range)} and iterations_range {list(p.iterations_range)} "
                          f"(tau x F lies in [{lo:g}, {hi:g}] s)")
    out = []
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > 10_000 * n:  # feasible but a vanishing share of the draws lands in rho_range
            raise ConfigError(f"workload.rho_range: {list(p.rho_range)} s is hit by too few tau x F draws "
                              f"(tau_range {list(p.tau_range)}, iterations_range {list(p.iterations_range)})")
        tau = float(rng.uniform(*p.tau_range))
        f = int(rng.integers(p.iterations_range[0], p.iterations_range[1] + 1))
        if p.rho_range[0] <= tau * f <= p.rho_range[1]:
            out.append((tau, f))
    return out


def _philly_arrivals(rng, n: int, data: Path, scale: float) -> np.ndarray:
    path = data / PHILLY_FILE
    if not path.is_file():
        raise ConfigError(f"workload.arrivals: philly needs {path} (set data_dir or RAYTESTBED_DATA_DIR)")
    arr, _, _ = load_philly(str(path), path.stat().st_mtime_ns)
    gaps = np.diff(arr[1:])  # skip the one huge gap after job 0
    if n >= gaps.size:
        raise ConfigError(f"workload.mix: {n} jobs need more than {n} arrival gaps, {path} has {gaps.size}")
    start = int(rng.integers(0, gaps.size - n))
    return np.concatenate([[0.0], np.cumsum(gaps[start : start + n - 1])]) * scale


def sjfbco_jobs(p: SjfbcoWorkloadParams, seed: int, nic_bps: float, data: Path | None) -> list[Job]:
    """Build the jobs (ids 0..n-1 in random order of sizes) with seed ``seed``."""
    rng = np.random.default_rng(seed)
    sizes = [g for g, n in sorted(p.mix.items()) for _ in range(n)]
    sizes = [sizes[i] for i in rng.permutation(len(sizes))]
    if p.durations == "philly" or p.arrivals == "philly":
        if data is None or not data.is_dir():
            raise ConfigError("workload: Philly data not found (set workload.data_dir or RAYTESTBED_DATA_DIR)")
    pairs = _philly_durations(rng, p, sizes, data) if p.durations == "philly" else \
        _uniform_durations(rng, p, len(sizes))
    arrivals = _philly_arrivals(rng, len(sizes), data, p.arrival_scale) if p.arrivals == "philly" \
        else np.zeros(len(sizes))
    jobs = []
    for jid, (g, (tau, f), t) in enumerate(zip(sizes, pairs, arrivals)):
        ring_factor = 2.0 * (g - 1) / g if g > 1 else 1.0
        grad = p.comm_fraction * tau * nic_bps / ring_factor  # bytes
        prof = StageProfile(fwd_s=tau / 3.0, bwd_s=2.0 * tau / 3.0, out_bytes=0.0, param_bytes=grad)
        jobs.append(Job(jid, float(round(t, 6)), f, (Stage(g, prof),), CommPattern.RAR,
                        model="sjfbco-synthetic", user=f"u{jid % 8}", duration_hint_s=tau * f))
    return jobs


@register_workload("sjfbco")
def sjfbco_workload(params: dict, ctx: WorkloadContext) -> list[Job]:
    """SJF-BCO's evaluation workload. ``params``: see :class:`SjfbcoWorkloadParams`."""
    p: SjfbcoWorkloadParams = parse_params(SjfbcoWorkloadParams, params, ctx.where)  # type: ignore[assignment]
    data = None
    if p.durations == "philly" or p.arrivals == "philly":
        data = ctx.resolve(p.data_dir) if p.data_dir else data_file(str(PHILLY_FILE), [ctx.base_dir]).parents[1]
    return sjfbco_jobs(p, ctx.seed, ctx.cluster.nic_bps, data)
