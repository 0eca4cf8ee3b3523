"""The job model shared by every policy and backend.

A job is a sequence of pipeline *stages*; stage ``s`` has ``replicas`` data-parallel
replicas, each on its own GPU (A-SRPT §III-A). Special cases:

* single-GPU job: one stage, one replica;
* data-parallel (ring-all-reduce, SJF-BCO / GADGET): one stage, ``w`` replicas;
* parameter-server (Parrot): one stage of ``w`` workers plus ``num_ps`` PS tasks
  that hold no GPU.

Per-stage profiles use the spec's convention (asrpt.md §2.2, impl.): one value per
boundary, ``out_bytes`` = bytes of one mini-batch's activations crossing from stage
``s`` to ``s+1``. The per-replica volumes of the paper are derived from it:
``d_out[s] = out_bytes[s] / k[s]`` and ``d_in[s+1] = out_bytes[s] / k[s+1]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any


class CommPattern(str, Enum):
    """How a job's workers exchange data every iteration."""

    PIPELINE = "pipeline"  #: pipeline stages + per-stage all-reduce (A-SRPT)
    RAR = "rar"  #: ring-all-reduce data parallel (SJF-BCO, GADGET)
    PS = "ps"  #: parameter-server push/pull coflows (Parrot)


class AllReduceKind(str, Enum):
    """All-reduce flavour among the replicas of one stage (A-SRPT §IV-B)."""

    RING = "rar"
    TREE = "tar"  #: NCCL double binary tree


@dataclass(frozen=True, slots=True)
class StageProfile:
    """Measured costs of one replica of one stage, for one mini-batch.

    Attributes:
        fwd_s: forward time p^f in seconds.
        bwd_s: backward time p^b in seconds.
        out_bytes: activation bytes of one mini-batch leaving this stage for the
            next one (gradients of the same size come back); 0 for the last stage.
        param_bytes: trainable parameter (= gradient) bytes h of the stage.
    """

    fwd_s: float
    bwd_s: float
    out_bytes: float = 0.0
    param_bytes: float = 0.0

    def __post_init__(self) -> None:
        for name in ("fwd_s", "bwd_s", "out_bytes", "param_bytes"):
            v = getattr(self, name)
            if not (v >= 0.0):  # also rejects NaN
                raise ValueError(f"StageProfile.{name} must be >= 0, got {v!r}")

    @property
    def compute_s(self) -> float:
        """Forward plus backward time in seconds (A-SRPT eq. 4)."""
        return self.fwd_s + self.bwd_s


@dataclass(frozen=True, slots=True)
class Stage:
    """A pipeline stage: ``replicas`` data-parallel copies of one layer range."""

    replicas: int
    profile: StageProfile

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError(f"Stage.replicas must be >= 1, got {self.replicas}")


Flow = tuple[int, int, float]  #: (src server, dst server, bytes)


@dataclass(frozen=True, slots=True)
class JobTraffic:
    """Traffic of a job given explicitly instead of derived from its pattern and profile.

    Attributes:
        coflows: if non-empty, the coflows of every iteration, in order (a chain with
            Starts-After dependencies, Parrot Def. 1-2); each is a tuple of flows
            ``(src server, dst server, bytes)`` with absolute server ids, used whatever
            the GPU placement (trace-given coflows, worked examples).
        compute_s: compute time of one iteration before its first coflow, seconds;
            None = the profile's p^f + p^b (Parrot §7 eq. 36 computation gap).
        max_flow_bytes: PS jobs only: every worker<->PS flow of every push/pull coflow
            gets a fresh size drawn uniformly from (0, L], L = this many bytes
            (Parrot §6.1 "coflow length"); None = h / #PS from the profile.
        seed: seeds those draws (one stream per job, iteration and coflow).
    """

    coflows: tuple[tuple[Flow, ...], ...] = ()
    compute_s: float | None = None
    max_flow_bytes: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "coflows", tuple(tuple((int(s), int(d), float(b)) for s, d, b in cf)
                                                  for cf in self.coflows))
        for k, cf in enumerate(self.coflows):
            for s, d, b in cf:
                if not (b >= 0.0) or s < 0 or d < 0:
                    raise ValueError(f"JobTraffic coflow {k}: bad flow ({s}, {d}, {b})")
        if self.compute_s is not None and not (self.compute_s >= 0.0):
            raise ValueError(f"JobTraffic.compute_s must be >= 0, got {self.compute_s!r}")
        if self.max_flow_bytes is not None and not (self.max_flow_bytes > 0.0):
            raise ValueError(f"JobTraffic.max_flow_bytes must be > 0, got {self.max_flow_bytes!r}")


@dataclass(slots=True)
class Job:
    """One training job.

    Attributes:
        job_id: unique integer id.
        arrival_s: submission time in seconds.
        iterations: true number of training iterations n_i (revealed at the end).
        stages: the parallel configuration (S_i stages with k_{i,s} replicas).
        comm: communication pattern.
        user, group: trace user id and recurrence group id (A-SRPT predictor).
        model: model name (e.g. ``vgg16``), informational.
        allreduce: ring or tree all-reduce among a stage's replicas.
        predicted_iterations: filled by a predictor; ``None`` if not predicted.
        num_ps: parameter servers of a PS job (0 otherwise).
        max_workers: elastic upper bound on workers (GADGET's N_i); ``None`` = fixed.
        duration_hint_s: the trace's run time, when the job came from a trace.
        extra: policy-specific parameters (e.g. GADGET utility λ's), never read
            by the core.
        traffic: explicit per-iteration traffic (:class:`JobTraffic`); ``None`` =
            derived from ``comm`` and the stage profiles (flow timing only).
        worker_iterations: ``iterations`` counts *worker*-iterations (mini-batches of one worker,
            GADGET's budget F_i): one step of a w-worker ring completes w of them, so the job needs
            fewer steps with more workers. False: one step is one iteration.
    """

    job_id: int
    arrival_s: float
    iterations: int
    stages: tuple[Stage, ...]
    comm: CommPattern = CommPattern.PIPELINE
    user: str = ""
    group: str = ""
    model: str = ""
    allreduce: AllReduceKind = AllReduceKind.RING
    predicted_iterations: int | None = None
    num_ps: int = 0
    max_workers: int | None = None
    duration_hint_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    traffic: JobTraffic | None = None
    worker_iterations: bool = False
    #: (stages, g_i) of the last ``gpus`` call: the sum is made again only when ``stages`` was replaced
    _gpus_of: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.stages = tuple(self.stages)
        self.comm = CommPattern(self.comm)
        self.allreduce = AllReduceKind(self.allreduce)
        if not self.stages:
            raise ValueError(f"job {self.job_id}: needs at least one stage")
        if self.iterations < 0:
            raise ValueError(f"job {self.job_id}: iterations must be >= 0")
        if self.arrival_s < 0:
            raise ValueError(f"job {self.job_id}: arrival_s must be >= 0")
        if self.comm is not CommPattern.PIPELINE and len(self.stages) != 1:
            raise ValueError(f"job {self.job_id}: {self.comm.value} jobs have exactly one stage")
        if self.comm is CommPattern.PS and self.num_ps < 1:
            raise ValueError(f"job {self.job_id}: a PS job needs num_ps >= 1")
        if self.worker_iterations and len(self.stages) != 1:
            raise ValueError(f"job {self.job_id}: worker_iterations needs a single-stage (data-parallel) job")

    @property
    def gpus(self) -> int:
        """GPUs needed: g_i = sum of replicas over stages."""
        memo = self._gpus_of
        if memo is None or memo[0] is not self.stages:
            memo = self._gpus_of = (self.stages, sum(st.replicas for st in self.stages))
        return memo[1]

    @property
    def num_stages(self) -> int:
        return len(self.stages)

    def replicas(self) -> tuple[int, ...]:
        """k_{i,s} for every stage."""
        return tuple(st.replicas for st in self.stages)

    def d_in(self, s: int) -> float:
        """Per-replica inbound activation bytes d^in_{i,s} (0 for the first stage)."""
        if s == 0:
            return 0.0
        return self.stages[s - 1].profile.out_bytes / self.stages[s].replicas

    def d_out(self, s: int) -> float:
        """Per-replica outbound activation bytes d^out_{i,s} (0 for the last stage)."""
        if s == len(self.stages) - 1:
            return 0.0
        return self.stages[s].profile.out_bytes / self.stages[s].replicas

    def pair_bytes(self, s: int) -> float:
        """Activation bytes each replica of stage ``s`` sends to each replica of stage ``s + 1`` in one
        iteration, A_s / (k_s k_{s+1}) (the gradients back are as many); the one source of a pipeline
        iteration's per-pair traffic for the simulator's coflows and the workers' plans."""
        return self.stages[s].profile.out_bytes / (self.stages[s].replicas * self.stages[s + 1].replicas)

    def ps_shard_bytes(self) -> float:
        """Bytes of the gradient each worker pushes to each parameter server (and pulls back) in one
        iteration: h / #PS (Parrot §2.2)."""
        return self.stages[0].profile.param_bytes / self.num_ps

    def iterations_per_step(self) -> int:
        """Iterations one step of the job (every worker's forward, backward and all-reduce) completes:
        its workers when ``worker_iterations``, else 1."""
        return self.stages[0].replicas if self.worker_iterations else 1

    def with_workers(self, workers: int) -> "Job":
        """A copy of a single-stage job with a different number of replicas (elastic resize)."""
        if len(self.stages) != 1:
            raise ValueError(f"job {self.job_id}: only single-stage jobs are elastic")
        return replace(self, stages=(Stage(workers, self.stages[0].profile),))


def admit_in_epochs(jobs: list[Job], epoch_s: float) -> list[Job]:
    """Jobs as an epoch-based simulator admits them (CoflowSim: ``admission_epoch_s`` = 10.24).

    Arrivals are only looked at every ``epoch_s`` seconds: at epoch start t = k x epoch_s every job
    with arrival in (t, t + epoch_s] (and at t = 0 every job with arrival in [0, epoch_s]) is
    admitted, i.e. a job arriving at a starts at max(0, ceil(a / epoch_s) - 1) x epoch_s, up to one
    epoch *early*, and its completion time counts from there. ``epoch_s`` = 0 keeps the exact
    arrivals. Returns copies with the admitted ``arrival_s``; the trace's arrival is kept in
    ``extra["trace_arrival_s"]``.
    """
    if epoch_s < 0 or not math.isfinite(epoch_s):
        raise ValueError(f"admission epoch must be >= 0 seconds, got {epoch_s!r}")
    if epoch_s == 0:
        return list(jobs)
    out = []
    for j in jobs:
        k = max(0, math.ceil(j.arrival_s / epoch_s) - 1)
        out.append(replace(j, arrival_s=k * epoch_s, extra={**j.extra, "trace_arrival_s": j.arrival_s}))
    return out
