"""Turn (model, GPUs, communication pattern) into a :class:`Job` with stage profiles.

An explicit configuration (``boundaries`` + ``replicas``, e.g. from
:mod:`raytestbed.placement.planner`) is used as given. Otherwise the parallel
configuration is a simple, documented default: data-parallel (``rar``) and parameter-server (``ps``)
jobs run the whole model as one stage with one replica per GPU; a ``pipeline``
job with g GPUs gets S = min(g, max_stages, #layers) stages split by
:meth:`ModelProfile.even_split` (balanced compute), and its g GPUs are dealt to
the stages as evenly as possible, extra replicas going to the heaviest stages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from raytestbed.core.cluster import Cluster, NotIdenticalServers
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.profile import ModelProfile
from raytestbed.core.timing import asrpt_alpha_min_tilde
from raytestbed.traces.csvrows import MAX_INT


_STAGE_CACHE: dict[tuple, tuple[ModelProfile, tuple[Stage, ...]]] = {}


def pipeline_stages(profile: ModelProfile, gpus: int, num_stages: int | None = None, max_stages: int = 4) -> tuple[Stage, ...]:
    """Stages of a pipeline job: S contiguous layer ranges, g GPUs dealt as replicas (cached)."""
    key = (id(profile), gpus, num_stages, max_stages)
    hit = _STAGE_CACHE.get(key)
    if hit is not None and hit[0] is profile:
        return hit[1]
    stages = _pipeline_stages(profile, gpus, num_stages, max_stages)
    _STAGE_CACHE[key] = (profile, stages)
    return stages


def _pipeline_stages(profile: ModelProfile, gpus: int, num_stages: int | None, max_stages: int) -> tuple[Stage, ...]:
    s = num_stages or min(gpus, max_stages, profile.num_layers)
    if not 1 <= s <= min(gpus, profile.num_layers):
        raise ValueError(f"cannot cut {profile.model} ({profile.num_layers} layers) into {s} stages on {gpus} GPUs")
    stage_profiles = profile.stage_profiles(profile.even_split(s))
    reps = [gpus // s] * s
    heaviest = sorted(range(s), key=lambda i: (-stage_profiles[i].compute_s, i))
    for i in heaviest[: gpus % s]:
        reps[i] += 1
    return tuple(Stage(k, p) for k, p in zip(reps, stage_profiles))


def configured_stages(profile: ModelProfile, boundaries: tuple[int, ...], replicas: tuple[int, ...]) -> tuple[Stage, ...]:
    """Stages of an explicit configuration (cached; ConfigError on bad boundaries)."""
    key = ("cfg", id(profile), boundaries, replicas)
    hit = _STAGE_CACHE.get(key)
    if hit is not None and hit[0] is profile:
        return hit[1]
    stages = tuple(Stage(k, p) for k, p in zip(replicas, profile.stage_profiles(list(boundaries))))
    _STAGE_CACHE[key] = (profile, stages)
    return stages


_WHOLE: dict[int, tuple[ModelProfile, StageProfile]] = {}


def _whole_model(profile: ModelProfile) -> StageProfile:
    hit = _WHOLE.get(id(profile))
    if hit is None or hit[0] is not profile:
        hit = (profile, profile.stage_profiles([0])[0])
        _WHOLE[id(profile)] = hit
    return hit[1]


def build_job(
    job_id: int,
    arrival_s: float,
    profile: ModelProfile,
    gpus: int,
    comm: CommPattern | str,
    iterations: int,
    user: str = "",
    group: str = "",
    num_stages: int | None = None,
    num_ps: int | None = None,
    duration_hint_s: float | None = None,
    boundaries: Sequence[int] | None = None,
    replicas: Sequence[int] | None = None,
) -> Job:
    """A job running ``profile`` on ``gpus`` GPUs with pattern ``comm``.

    ``boundaries`` (first layer of each stage) and ``replicas`` (k_s per stage,
    summing to ``gpus``) give an explicit pipeline configuration.
    """
    comm = CommPattern(comm)
    if gpus < 1:
        raise ValueError(f"job {job_id}: gpus must be >= 1")
    if replicas is not None or boundaries is not None:
        if replicas is None or boundaries is None or len(replicas) != len(boundaries):
            raise ValueError(f"job {job_id}: boundaries and replicas must be given together, one per stage")
        if sum(replicas) != gpus:
            raise ValueError(f"job {job_id}: replicas {tuple(replicas)} do not add up to {gpus} GPUs")
        stages = configured_stages(profile, tuple(boundaries), tuple(replicas))
    elif comm is CommPattern.PIPELINE and gpus > 1:
        stages = pipeline_stages(profile, gpus, num_stages)
    else:
        stages = (Stage(gpus, _whole_model(profile)),)
    return Job(
        job_id=job_id, arrival_s=arrival_s, iterations=int(iterations), stages=stages, comm=comm,
        user=str(user), group=str(group), model=profile.model,
        num_ps=(num_ps or gpus) if comm is CommPattern.PS else 0, duration_hint_s=duration_hint_s,
    )


def iterations_for_duration(job: Job, duration_s: float, cluster: Cluster) -> int:
    """n_i = duration / alpha~min_i (A-SRPT §V-A-1-b), at least 1 (ValueError if not representable)."""
    try:
        g = cluster.gpus_per_server
    except NotIdenticalServers as e:
        raise NotIdenticalServers(f"duration_s: converting a duration to iterations (duration / A-SRPT's alpha~min) "
                                  f"needs identical servers (the same GPU count each); {e}") from None
    alpha = asrpt_alpha_min_tilde(job, g, cluster.nic_bps, cluster.intra_bps)
    return scaled_iterations(duration_s / alpha, 1.0, f"job {job.job_id}: duration {duration_s:g} s")


def scaled_iterations(n: float, scale: float, what: str) -> int:
    """max(1, round(n x scale)) as an int; ValueError ``<what>: ...`` if it is not finite or above MAX_INT."""
    x = n * scale
    if not (math.isfinite(x) and x <= MAX_INT):
        raise ValueError(f"{what}: {n:g} x {scale:g} = {x:g} iterations, more than {MAX_INT}")
    return max(1, round(x))
