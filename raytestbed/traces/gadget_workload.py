"""GADGET's experiment workload (GADGET §VI-1), kind ``gadget``.

Jobs arrive by a Poisson process over the first ``arrival_slots`` slots of length
``slot_s`` seconds (a stand-in for the Google trace's arrivals). ``arrivals: <trace>`` (``google`` --
the Google cluster trace of 2011, the pattern the paper uses --, ``philly`` or ``aaic``, see
:mod:`raytestbed.traces.arrival_patterns`) instead takes the submit times of
``jobs`` consecutive jobs of that trace and maps them linearly onto the same
window: same job count and window, the trace's bursty arrival pattern. The
Poisson gaps are still drawn (and discarded), so with the same seed every job
parameter is the same as with Poisson arrivals and only the arrival times differ.
Job parameters are integers drawn uniformly:
N_i in [1, 5] (max workers), F_i in [1000, 6000] (budget), zeta_i in [50, 500]
(iterations per worker per slot), b_i in [100, 5000] Mbit/s (reserved ring
bandwidth), sigmoid lambda1 in [1, 100], lambda3 in [300, 3000] and real
lambda2 in (0, 1). Baselines' fixed worker count is drawn in [1, 10] and capped
at N_i (impl.). Host memory per worker is drawn in [1, 8] GB
(the second resource type, impl.).

Budget units: ``budget_mode: iterations`` (default) reads
F_i as worker-iterations (l_i = zeta_i: F_i / zeta_i worker-slots);
``literal`` reads F_i as worker-slots (F_i * zeta_i iterations; never binds
within T = 200 slots).

Units of lambda2: ``lambda2_unit: iteration`` (default, the paper's "sensitivity to iterations": the
sigmoid's exponent is -lambda2 (zeta_i x worker-slots - lambda3), so with zeta_i >= 50 one worker-slot
moves it by 50 lambda2 or more and the utility is close to a step at lambda3); ``worker_slot`` reads the
drawn lambda2 per worker-slot of service instead: the job's per-iteration lambda2 is the draw / zeta_i,
the exponent -draw (worker-slots - lambda3 / zeta_i). The same draws either way; only lambda2 differs.

Each job is one ring-all-reduce stage whose ``iterations`` are worker-iterations
(``Job.worker_iterations``: one step of a w-worker ring completes w of them, on every
backend): the stage's forward time is slot_s / zeta_i (rounded down to about a microsecond,
:func:`step_time`), so each worker does zeta_i iterations per slot. Its parameter bytes are 0: b_i is a reservation checked by the
placement, not a transfer. ``job.extra`` holds zeta, F (in iterations), b_bps, mem_gb, lambda1..3,
N and fixed_workers.

``models: [NAME, ...]`` (profiled models, e.g. zoo presets ``vgg19-cifar``, ``gpt-small``; job i runs
``models[i % len(models)]``) makes each job that model's ring-all-reduce job instead, so the emulator can
run it with real compute: the stage is the whole model's profile (forward t^f M and backward t^b
seconds, gradient bytes d, as the zoo profiled them) and zeta_i is not drawn but follows from the
model, zeta_i = slot_s / (t^f M + t^b) (a float: the compute-only term of GADGET eq. (1), which §III
uses to motivate zeta_i; the ring all-reduce of d bytes comes on top where the backend charges it).
Every other parameter, and the arrivals, are drawn as without ``models`` (zeta_i is still drawn, then
discarded), so the jobs differ only in their model, step and zeta_i.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field, PositiveFloat, PositiveInt, field_validator, model_validator

from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.profile import ModelProfile
from raytestbed.errors import TraceError
from raytestbed.traces.arrival_patterns import ARRIVAL_KINDS, trace_shaped_arrivals
from raytestbed.traces.registry import LoaderParams, WorkloadContext, parse_params, register_workload

MBPS = 1e6 / 8  # bytes/s per Mbit/s


class GadgetParams(LoaderParams):
    kind: str = "gadget"
    jobs: PositiveInt = 200
    slots: PositiveInt = 200  #: T
    slot_s: PositiveFloat = 60.0
    arrival_slots: PositiveFloat | None = None  #: arrivals spread over this many slots (default: all T)
    arrivals: str = "poisson"  #: ``poisson`` or a trace name of arrival_patterns.ARRIVAL_TRACES
    budget_mode: str = "iterations"
    max_workers: tuple[PositiveInt, PositiveInt] = (1, 5)
    budget: tuple[PositiveInt, PositiveInt] = (1000, 6000)
    zeta: tuple[PositiveInt, PositiveInt] = (50, 500)
    bandwidth_mbps: tuple[PositiveInt, PositiveInt] = (100, 5000)
    lambda1: tuple[PositiveInt, PositiveInt] = (1, 100)
    lambda3: tuple[PositiveInt, PositiveInt] = (300, 3000)
    fixed_workers: tuple[PositiveInt, PositiveInt] = (1, 10)
    mem_gb: tuple[PositiveInt, PositiveInt] = (1, 8)
    lambda2: tuple[float, float] = Field((0.0, 1.0))
    lambda2_unit: Literal["iteration", "worker_slot"] = "iteration"
    models: list[str] | None = Field(None, min_length=1)  #: profiled models, job i runs models[i % len]

    @field_validator("arrivals")
    @classmethod
    def _check_arrivals(cls, v: str) -> str:
        if v not in ARRIVAL_KINDS:
            raise ValueError(f"unknown arrival pattern {v!r} (known: {', '.join(ARRIVAL_KINDS)})")
        return v

    @model_validator(mode="after")
    def _check(self) -> "GadgetParams":
        if self.budget_mode not in ("iterations", "literal"):
            raise ValueError("budget_mode must be 'iterations' or 'literal'")
        for name in ("max_workers", "budget", "zeta", "bandwidth_mbps", "lambda1", "lambda3", "fixed_workers",
                     "mem_gb", "lambda2"):
            lo, hi = getattr(self, name)
            if lo > hi:
                raise ValueError(f"{name}: min > max")
        if not (0.0 <= self.lambda2[0] and self.lambda2[1] <= 1.0):
            raise ValueError("lambda2 must lie in (0, 1)")
        return self


#: step times are whole multiples of this (seconds, 2^-20: about 1 microsecond)
STEP_GRID_S = 2.0 ** -20


def step_time(slot_s: float, zeta: int) -> float:
    """Seconds per step of a worker doing ``zeta`` iterations per slot of ``slot_s`` seconds: slot_s / zeta
    rounded down to a multiple of :data:`STEP_GRID_S`. Sums of such times are exact in floating point, so the
    zeta steps a worker starts at a slot's beginning end at or just before (< zeta microseconds) the slot's
    end on every backend alike; slot_s / zeta itself makes them end at the slot's end give or take a
    rounding error, before or after the policy's tick depending on the sum's last bit."""
    return math.floor(slot_s / zeta / STEP_GRID_S) * STEP_GRID_S


def _model_stage(profile: ModelProfile, name: str) -> StageProfile:
    """The whole model as one data-parallel stage (seconds, bytes); refuses a profile without compute time."""
    prof = profile.stage_profiles([0])[0]
    if prof.fwd_s + prof.bwd_s <= 0:
        raise TraceError(f"workload.models: model {name!r} has no compute time in its profile")
    return prof


def _ri(rng: np.random.Generator, lohi) -> int:
    return int(rng.integers(lohi[0], lohi[1] + 1))


@register_workload("gadget")
def gadget_workload(params: dict, ctx: WorkloadContext) -> list[Job]:
    """GADGET's experiment workload (GADGET §VI-1). ``params``: see :class:`GadgetParams`."""
    p: GadgetParams = parse_params(GadgetParams, params, ctx.where)  # type: ignore[assignment]
    rng = np.random.default_rng(ctx.seed)
    span = (p.arrival_slots if p.arrival_slots is not None else p.slots) * p.slot_s
    mean_gap = span / p.jobs
    shaped = None if p.arrivals == "poisson" else trace_shaped_arrivals(p.arrivals, p.jobs, span, ctx.seed,
                                                                         [ctx.base_dir])
    steps = {m: _model_stage(ctx.profile(m, f"{ctx.where}.models"), m) for m in (p.models or ())}
    t_poisson = 0.0
    jobs = []
    for jid in range(p.jobs):
        t_poisson += float(rng.exponential(mean_gap)) if jid else 0.0  # drawn in both modes: same job parameters
        t = t_poisson if shaped is None else float(shaped[jid])
        n = _ri(rng, p.max_workers)
        f = _ri(rng, p.budget)
        zeta = _ri(rng, p.zeta)
        b = _ri(rng, p.bandwidth_mbps) * MBPS
        lam1 = _ri(rng, p.lambda1)
        lam2 = float(rng.uniform(*p.lambda2))
        while lam2 <= 0.0:
            lam2 = float(rng.uniform(*p.lambda2))
        lam3 = _ri(rng, p.lambda3)
        fixed = min(_ri(rng, p.fixed_workers), n)
        mem = float(_ri(rng, p.mem_gb))
        if p.models:
            model = p.models[jid % len(p.models)]
            prof = steps[model]
            zeta = p.slot_s / (prof.fwd_s + prof.bwd_s)
        else:
            model = "gadget-synthetic"
            prof = StageProfile(fwd_s=step_time(p.slot_s, zeta), bwd_s=0.0, out_bytes=0.0, param_bytes=0.0)
        budget_iters = f if p.budget_mode == "iterations" else int(f * zeta)
        if p.lambda2_unit == "worker_slot":
            lam2 = lam2 / zeta  # the utility's lambda2 is per iteration: a worker-slot is zeta iterations
        jobs.append(Job(
            job_id=jid, arrival_s=round(t, 6), iterations=int(budget_iters), stages=(Stage(fixed, prof),),
            comm=CommPattern.RAR, model=model, max_workers=n, worker_iterations=True,
            extra=dict(zeta=float(zeta), F=float(budget_iters), F_raw=f, b_bps=b, mem_gb=mem, lambda1=float(lam1),
                       lambda2=lam2, lambda3=float(lam3), N=n, fixed_workers=fixed, slot_s=p.slot_s,
                       budget_mode=p.budget_mode, lambda2_unit=p.lambda2_unit),
        ))
    return jobs
