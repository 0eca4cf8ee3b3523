"""Synthetic recurring-group workload (seeded).

Jobs come from ``groups`` recurring job groups (A-SRPT §IV-C-3: most jobs recur).
Each group fixes a user, a model, a GPU count, a communication pattern and a
typical iteration count; a job picks a group (Zipf-like popularity, exponent
``zipf_s``) and runs typical x lognormal(0, ``iteration_spread``) iterations.
Arrivals are Poisson with mean gap ``mean_interarrival_s``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, PositiveFloat, PositiveInt, field_validator

from raytestbed.core.job import CommPattern, Job
from raytestbed.errors import ConfigError
from raytestbed.traces.jobs import build_job, scaled_iterations
from raytestbed.traces.registry import LoaderParams, WorkloadContext, parse_params, register_workload


class SyntheticParams(LoaderParams):
    kind: str = "synthetic"
    jobs: PositiveInt = 50
    mean_interarrival_s: PositiveFloat = 60.0
    models: list[str] = Field(default_factory=lambda: ["vgg16", "resnet50", "inception_v3", "gnmt"], min_length=1)
    gpu_mix: dict[int, float] = Field(default_factory=lambda: {1: 0.5, 2: 0.2, 4: 0.2, 8: 0.1})
    comm_mix: dict[CommPattern, float] = Field(default_factory=lambda: {CommPattern.PIPELINE: 0.5, CommPattern.RAR: 0.5})
    iterations: tuple[PositiveInt, PositiveInt] = (200, 5000)
    groups: PositiveInt = 20
    users: PositiveInt = 8
    zipf_s: float = Field(1.1, ge=0)
    iteration_spread: float = Field(0.3, ge=0)
    #: a job asking for more GPUs than the cluster has: ``error`` refuses the trial (naming the job and both
    #: sizes), ``clip`` runs it on every GPU of the cluster
    oversize: Literal["error", "clip"] = "error"

    @field_validator("gpu_mix", "comm_mix")
    @classmethod
    def _probabilities(cls, v):
        if not v or any(p < 0 for p in v.values()) or sum(v.values()) <= 0:
            raise ValueError("needs non-negative weights with a positive sum")
        if any(isinstance(k, int) and k < 1 for k in v):
            raise ValueError("GPU counts must be >= 1")
        return v

    @field_validator("iterations")
    @classmethod
    def _range(cls, v):
        if v[0] > v[1]:
            raise ValueError("iterations: min > max")
        return v


def _choice(rng: np.random.Generator, mix: dict) -> object:
    keys = list(mix)
    p = np.array([mix[k] for k in keys], dtype=float)
    return keys[int(rng.choice(len(keys), p=p / p.sum()))]


def _weighted_draw(p: np.ndarray):
    """``lambda rng: int(rng.choice(len(p), p=p))`` with the cumulative weights made once: NumPy's
    ``Generator.choice`` (with replacement) draws one ``rng.random()`` and looks it up in
    ``cumsum(p) / cumsum(p)[-1]`` (``side="right"``); rebuilding that per draw costs O(len(p))."""
    np.random.default_rng(0).choice(len(p), p=p)  # NumPy's own checks of p, once
    cdf = p.cumsum()
    cdf /= cdf[-1]
    return lambda rng: int(cdf.searchsorted(rng.random(), side="right"))


@register_workload("synthetic")
def synthetic_workload(params: dict, ctx: WorkloadContext) -> list[Job]:
    """Synthetic recurring-group workload (seeded). ``params``: see :class:`SyntheticParams`."""
    p: SyntheticParams = parse_params(SyntheticParams, params, ctx.where)  # type: ignore[assignment]
    rng = np.random.default_rng(ctx.seed)
    for m in p.models:
        ctx.profile(m, f"{ctx.where}.models")
    lo, hi = np.log(p.iterations[0]), np.log(p.iterations[1])
    groups = []
    for gid in range(p.groups):
        groups.append(dict(
            user=f"u{int(rng.integers(p.users))}",
            model=p.models[int(rng.integers(len(p.models)))],
            gpus=int(_choice(rng, p.gpu_mix)),
            comm=_choice(rng, p.comm_mix),
            typical=float(np.exp(rng.uniform(lo, hi))),
        ))
    weights = 1.0 / np.arange(1, p.groups + 1) ** p.zipf_s
    weights /= weights.sum()
    group_of = _weighted_draw(weights)
    t = 0.0
    jobs = []
    for jid in range(p.jobs):
        t += float(rng.exponential(p.mean_interarrival_s)) if jid else 0.0
        gid = group_of(rng)
        g = groups[gid]
        try:
            iters = scaled_iterations(g["typical"], float(rng.lognormal(0.0, p.iteration_spread)),
                                      f"job {jid}: typical iterations x lognormal(0, iteration_spread)")
        except ValueError as e:
            raise ConfigError(f"{ctx.where}.iteration_spread: {e}") from None
        gpus, total = g["gpus"], ctx.cluster.total_gpus
        if gpus > total:
            if p.oversize == "error":
                raise ConfigError(f"{ctx.where}: job {jid} (group g{gid}) needs {gpus} GPUs but the cluster has "
                                  f"{total} (set the workload's oversize: clip to run such jobs on {total} GPUs)")
            gpus = total
        jobs.append(build_job(jid, round(t, 6), ctx.profiles[g["model"]], gpus, g["comm"], iters, user=g["user"],
                              group=f"g{gid}"))
    return jobs
