"""A-SRPT workload construction from a real job trace (A-SRPT §V-A-1-b, §V-B).

The trace loaders (:mod:`~raytestbed.traces.aaic`, :mod:`~raytestbed.traces.philly`,
:mod:`~raytestbed.traces.dirlab`) read rows into :class:`TraceRow` (arrival,
GPUs, run time, user, recurrence group); :func:`build_asrpt_jobs` turns them
into jobs the way the paper does:

1. **Job set**: ``jobs`` consecutive rows (by arrival) starting at ``start``
   (an index, or ``random``: a seeded random start; the paper samples random
   runs of consecutive jobs). Arrivals are shifted so the first job arrives at 0.
2. **Single-GPU share** (Fig. 7, optional ``single_gpu_share`` = p): exactly
   round(p N) randomly chosen jobs become single-GPU, the others distributed.
   A job whose kind changes moves to a variant of its group (``<group>+s`` /
   ``<group>+d``) so recurrences stay recurrences; a ``+d`` variant draws its
   GPU count once, from the GPU counts of the multi-GPU jobs of the set.
   Arrivals and run times are kept.
3. **Model and configuration per group** (seeded, groups in order of first
   appearance): a single-GPU group gets a random model of ``models`` with the
   one-GPU configuration; a multi-GPU group gets a random model and one of its
   ``configs_per_model`` fastest configurations from the pipeline planner
   (:mod:`raytestbed.placement.planner`) for its GPU count. Every job of the
   group shares that choice. (No memory model: every profiled model is taken
   to fit one GPU; the paper keeps T5/GPT off single-GPU groups.)
4. **Iterations**: n_i = run time / alpha~min_i of the assigned configuration
   on the trial's cluster (A-SRPT §V-A-1-b; :func:`raytestbed.core.timing.asrpt_alpha_min_tilde`
   with Heavy-Edge seeded by the trial seed, as the A-SRPT policies compute it), at least 1.
5. **Down-scaling**: arrivals x ``arrival_scale`` and iterations x
   ``iteration_scale`` (the paper's testbed used 0.1 for both). Instead of
   ``arrival_scale``, ``offered_load`` = L derives it from the trace:
   arrival_scale = B / (G L), with B = sum(GPUs x run time) / arrival span over
   all trace rows read (the trace's average busy GPUs) and G the cluster's GPUs,
   as ``scripts/reproduce_asrpt.py --load`` does. The job set's own offered load
   (sum g_i n_i alpha~min_i / (G x its span)) differs from L by how busy its
   window of the trace is.
6. **Predictor history** (optional ``history_jobs`` = H): the H trace rows just
   *before* the job set are built the same way (same single-GPU re-sharing rule,
   same group -> model/configuration choice, n_i = run time / alpha~min_i, same
   scaling) and returned as ``(group, user, iterations)`` rows in
   :attr:`TraceJobs.predictor_history`; the trial passes them as ``history`` to
   every policy that takes one, so its predictor is fitted on earlier trace jobs
   before the first arrival (A-SRPT §V-A-1-c: the model is trained on the first
   80% of the trace). The job set's own jobs are never in the history, and the
   job set is exactly the one built without history (a ``random`` start is drawn
   as before; if it lies within H rows of the trace start, the history is shorter).

All jobs use the ``pipeline`` pattern (one stage = data parallel). Times are seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, model_validator

from raytestbed.core.job import CommPattern, Job
from raytestbed.core.timing import Mapper, asrpt_alpha_min_tilde
from raytestbed.errors import ConfigError, TraceError
from raytestbed.placement.heavy_edge import heavy_edge_mapper
from raytestbed.placement.planner import PipelineConfig, plan_configs, planning_bandwidth
from raytestbed.traces.jobs import build_job, scaled_iterations
from raytestbed.traces.registry import LoaderParams, WorkloadContext
from raytestbed.units import gbps_to_bytes_per_s

#: why the A-SRPT trace kinds need identical servers (their one-line refusal on other clusters)
NEEDS_G = "builds A-SRPT jobs (pipeline plans and iterations = duration / alpha~min for g GPUs per server)"

#: GPU-measured PipeDream profiles standing in for the paper's Table I models
#: (VGG19 -> vgg16, ResNet152 -> resnet101, Inception-V3, NLP -> GNMT / GNMT-large).
DEFAULT_MODELS = ["vgg16", "resnet101", "inception_v3", "gnmt", "gnmt_large"]


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One trace job: ``where`` names its file and line for error messages."""

    where: str
    arrival_s: float
    gpus: int
    duration_s: float
    user: str
    group: str
    #: extra (name, value) pairs copied into ``job.extra`` (e.g. predictor features of the trace)
    features: tuple[tuple[str, object], ...] = ()


class AsrptTraceParams(LoaderParams):
    """Parameters shared by the A-SRPT trace loaders (see the module docstring)."""

    kind: str = ""
    path: str | None = Field(None, description="explicit trace file (default: the trace's file in the data folder)")
    jobs: PositiveInt | None = Field(None, description="number of consecutive jobs (default: all)")
    start: NonNegativeInt | Literal["random"] = 0
    models: list[str] = Field(default_factory=lambda: list(DEFAULT_MODELS), min_length=1)
    configs_per_model: PositiveInt = 3
    max_stages: PositiveInt = 8
    arrival_scale: PositiveFloat = 1.0
    offered_load: PositiveFloat | None = Field(
        None, description="target offered load L instead of arrival_scale: arrivals are scaled by "
        "B / (G x L), B = the trace's average busy GPUs (sum of GPUs x run time over the arrival span of all "
        "rows read), G = the cluster's GPUs (as scripts/reproduce_asrpt.py --load); null: use arrival_scale")
    iteration_scale: PositiveFloat = 1.0
    single_gpu_share: float | None = Field(None, ge=0.0, le=1.0)
    oversize: Literal["error", "drop"] = "error"
    history_jobs: NonNegativeInt = Field(
        0, description="trace rows just before the job set whose (group, user, iterations) train the "
        "policies' predictors before the first arrival (0: cold start)")
    history_mode: Literal["before", "joint"] = Field(
        "before", description="before: the history is the history_jobs rows just before the job set, built after "
        "it (step 6); joint: one run of history_jobs + jobs consecutive rows at a start drawn by its own seeded "
        "generator over all rows read, built in one pass (single-GPU re-sharing and group choices over the whole "
        "run), the first history_jobs being the history: the sampling of the A-SRPT simulation study's "
        "reproduction (raytestbed/experiments/papers/asrpt.py)")
    history_span: Literal["window", "all"] = Field(
        "window", description="window: the history is the history_jobs rows before the job set; all: every trace "
        "row before the job set (history_jobs then only sets where the set may start, as with window: the same "
        "job-set rows), the paper's 'trained on the earlier part of the trace' (A-SRPT §V-A-1-c)")
    plan_nic_gbps: PositiveFloat | None = Field(
        None, description="plan the jobs (configurations, alpha~min, iteration counts) as on this NIC bandwidth, "
        "Gbit/s, instead of the cluster's: A-SRPT's Fig. 8 builds its jobs once on the 10 Gbps cluster and varies "
        "only the NIC they run on")

    @model_validator(mode="after")
    def _one_arrival_scaling(self) -> "AsrptTraceParams":
        if self.offered_load is not None and "arrival_scale" in self.model_fields_set:
            raise ValueError("offered_load: give either offered_load or arrival_scale, not both "
                             "(offered_load derives the arrival scale from the trace)")
        return self


class TraceJobs(list):
    """The jobs of a trace workload, plus the rows that train the predictors (step 6).

    ``predictor_history``: (group, user, iterations) of the ``history_jobs`` trace jobs
    before the job set, oldest first; empty when ``history_jobs`` is 0. ``history_jobs``: the
    same rows as built jobs (their ``extra`` carries the trace's predictor features; for
    offline predictor evaluation, :mod:`raytestbed.predict.evaluate`).
    """

    predictor_history: list[tuple[str, str, int]]
    history_jobs: list[Job]
    #: the arrival scale applied (``arrival_scale``, or the one ``offered_load`` derived)
    arrival_scale: float

    def __init__(self, jobs=(), history_jobs=(), arrival_scale: float = 1.0) -> None:
        super().__init__(jobs)
        self.history_jobs = list(history_jobs)
        self.predictor_history = [(j.group, j.user, j.iterations) for j in self.history_jobs]
        self.arrival_scale = arrival_scale


def trace_busy_gpus(rows: Sequence[TraceRow]) -> float:
    """Average GPUs a trace keeps busy: sum of GPUs x run time over its arrival span (at least 1 s)."""
    if not rows:
        return 0.0
    span = max(max(r.arrival_s for r in rows) - min(r.arrival_s for r in rows), 1.0)
    return sum(r.gpus * r.duration_s for r in rows) / span


def alpha_min_mapper(seed: int) -> Mapper:
    """The mapper of alpha~min (A-SRPT §IV-B): Heavy-Edge seeded like the policies."""
    return heavy_edge_mapper(seed)


def select_rows(rows: Sequence[TraceRow], p: AsrptTraceParams, rng: np.random.Generator, where: str) -> list[TraceRow]:
    """The job set: ``p.jobs`` consecutive rows from ``p.start`` (rows are in arrival order)."""
    return select_rows_with_history(rows, p, rng, where)[1]


def select_rows_with_history(rows: Sequence[TraceRow], p: AsrptTraceParams, rng: np.random.Generator,
                             where: str) -> tuple[list[TraceRow], list[TraceRow]]:
    """(history rows, job-set rows): the ``p.history_jobs`` rows just before the job set (``history_span:
    all``: every row before it), then the set."""
    n = len(rows)
    h = int(p.history_jobs)
    want = n - h if p.jobs is None else p.jobs
    if want + h > n or want <= 0:
        more = f" (+ {h} history jobs)" if h else ""
        raise ConfigError(f"{where}.jobs: {want} jobs asked{more}, the trace has {n}")
    if p.start == "random":  # the same draw as without history; fewer history rows near the trace start
        start = int(rng.integers(0, n - want + 1))
        first = 0 if p.history_span == "all" else max(0, start - h)
        return list(rows[first:start]), list(rows[start:start + want])
    else:
        start = int(p.start) if p.jobs is not None or h == 0 else max(int(p.start), h)
        if start + want > n:
            raise ConfigError(f"{where}.start: {start} + {want} jobs runs past the trace's {n} rows")
        if start < h:
            raise ConfigError(f"{where}.history_jobs: {h} history rows need start >= {h}, got {start}")
    return list(rows[0 if p.history_span == "all" else start - h:start]), list(rows[start:start + want])


def _reshare(rows: list[TraceRow], share: float, rng: np.random.Generator, where: str,
             variant_gpus: dict[str, int] | None = None, pool: list[int] | None = None) -> list[TraceRow]:
    """Make exactly round(share * N) jobs single-GPU (step 2 of the module docstring).

    ``variant_gpus`` / ``pool``: the ``+d`` variants' GPU counts and the GPU counts to
    draw new ones from, shared between the job set and its history rows (step 6).
    """
    n = len(rows)
    n_single = int(round(share * n))
    single = np.zeros(n, dtype=bool)
    single[rng.choice(n, size=n_single, replace=False)] = True
    if pool is None:
        pool = [r.gpus for r in rows if r.gpus > 1]
    if not pool and n_single < n:
        raise ConfigError(f"{where}.single_gpu_share: the job set has no multi-GPU job to draw GPU counts from")
    if variant_gpus is None:
        variant_gpus = {}
    out = []
    for r, s in zip(rows, single):
        if s and r.gpus > 1:
            out.append(replace(r, gpus=1, group=r.group + "+s"))
        elif not s and r.gpus == 1:
            key = r.group + "+d"
            if key not in variant_gpus:
                variant_gpus[key] = int(pool[int(rng.integers(len(pool)))])
            out.append(replace(r, gpus=variant_gpus[key], group=key))
        else:
            out.append(r)
    return out


def build_asrpt_jobs(rows: Sequence[TraceRow], p: AsrptTraceParams, ctx: WorkloadContext) -> "TraceJobs":
    """Jobs of an A-SRPT trial from trace rows in arrival order (module docstring, steps 1-5)."""
    where = ctx.where
    rng = np.random.default_rng(ctx.seed)
    for m in p.models:
        ctx.profile(m, f"{where}.models")
    cluster = ctx.cluster
    total = cluster.total_gpus
    g = cluster.gpus_per_server
    nic_bps = cluster.nic_bps if p.plan_nic_gbps is None else gbps_to_bytes_per_s(p.plan_nic_gbps)
    rows = list(rows)
    arrival_scale = p.arrival_scale
    if p.offered_load is not None:  # step 5: from all rows read, before any is dropped or selected
        busy = trace_busy_gpus(rows)
        if busy <= 0:
            raise ConfigError(f"{where}.offered_load: the trace keeps no GPU busy (zero run times)")
        arrival_scale = busy / (total * p.offered_load)
    if p.history_mode == "joint" and p.history_jobs:
        return _build_joint(rows, p, ctx, arrival_scale)
    if p.oversize == "drop":
        rows = [r for r in rows if r.gpus <= total]
    else:
        for r in rows:
            if r.gpus > total:
                raise TraceError(f"{r.where}: job needs {r.gpus} GPUs but the cluster has {total} "
                                 f"(set oversize: drop to skip such jobs)")
    if not rows:
        raise ConfigError(f"{where}: no trace rows left")
    hist_rows, rows = select_rows_with_history(rows, p, rng, where)
    variant_gpus: dict[str, int] = {}
    pool = [r.gpus for r in rows if r.gpus > 1]
    if p.single_gpu_share is not None:
        rows = _reshare(rows, p.single_gpu_share, rng, where, variant_gpus, pool)
    t0 = rows[0].arrival_s

    mapper = alpha_min_mapper(ctx.seed)
    choice: dict[tuple[str, int], tuple[str, PipelineConfig]] = {}
    alpha_cache: dict[tuple[str, tuple, tuple], float] = {}

    def make(jid: int, r: TraceRow) -> Job:  # jid -1: a history row (arrival unused, set to 0)
        key = (r.group, r.gpus)
        if key not in choice:
            model = p.models[int(rng.integers(len(p.models)))]
            prof = ctx.profiles[model]
            bw = planning_bandwidth(r.gpus, g, nic_bps, cluster.intra_bps)
            try:
                cfgs = plan_configs(prof, r.gpus, bw, max_stages=p.max_stages)[: p.configs_per_model]
            except ValueError as e:
                raise TraceError(f"{r.where}: {e}") from None
            choice[key] = (model, cfgs[int(rng.integers(len(cfgs)))])
        model, cfg = choice[key]
        prof = ctx.profiles[model]
        job = build_job(max(jid, 0), max(0.0, r.arrival_s - t0) * arrival_scale if jid >= 0 else 0.0, prof, r.gpus, CommPattern.PIPELINE, 1,
                        user=r.user, group=r.group, duration_hint_s=r.duration_s,
                        boundaries=cfg.boundaries, replicas=cfg.replicas)
        akey = (model, cfg.boundaries, cfg.replicas)
        alpha = alpha_cache.get(akey)
        if alpha is None:
            alpha = asrpt_alpha_min_tilde(job, g, nic_bps, cluster.intra_bps, mapper)
            alpha_cache[akey] = alpha
        try:
            job.iterations = scaled_iterations(r.duration_s / alpha, p.iteration_scale, "run time / alpha~min x iteration_scale")
        except ValueError as e:
            raise TraceError(f"{r.where}: {e}") from None
        job.extra["trace_row"] = r.where
        job.extra.update(r.features)
        return job

    jobs = [make(jid, r) for jid, r in enumerate(rows)]
    # step 6, after the job set so that its jobs do not depend on history_jobs
    if hist_rows and p.single_gpu_share is not None:
        hist_rows = _reshare(hist_rows, p.single_gpu_share, rng, where, variant_gpus, pool)
    return TraceJobs(jobs, [make(-1, r) for r in hist_rows], arrival_scale)


def _build_joint(rows: list[TraceRow], p: AsrptTraceParams, ctx: WorkloadContext,
                 arrival_scale: float) -> "TraceJobs":
    """``history_mode: joint``: H + N consecutive rows built in one pass; the first H are the history.

    The start is drawn over all rows read by ``default_rng(seed)`` (before over-sized rows are
    dropped), the run is built as a workload of H + N jobs from that start, and the job set's
    arrivals are shifted so its first job arrives at 0. ``history_span: all``: the run starts at
    the trace's first row instead, and every row before the same job set is history.
    """
    h, n = int(p.history_jobs), p.jobs
    if n is None:
        raise ConfigError(f"{ctx.where}.history_mode: joint needs jobs")
    if h + n > len(rows):
        raise ConfigError(f"{ctx.where}.jobs: {n} jobs + {h} history jobs asked, the trace has {len(rows)} rows")
    start = p.start
    if start == "random":
        start = int(np.random.default_rng(ctx.seed).integers(0, len(rows) - (h + n) + 1))
    if p.history_span == "all":
        start, h = 0, start + h
    run = p.model_copy(update={"jobs": h + n, "start": start, "history_jobs": 0, "history_mode": "before",
                               "history_span": "window", "offered_load": None, "arrival_scale": arrival_scale})
    built = build_asrpt_jobs(rows, run, ctx)
    hist, body = list(built[:h]), list(built[h:])
    t0 = body[0].arrival_s
    jobs = [replace(j, job_id=i, arrival_s=j.arrival_s - t0, extra=dict(j.extra)) for i, j in enumerate(body)]
    return TraceJobs(jobs, hist, arrival_scale)

