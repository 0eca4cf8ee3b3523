"""What every worker of a placed job does: a pure description, no Ray, no torch.

:func:`plan_job` turns a core :class:`~raytestbed.core.job.Job` and its
:class:`~raytestbed.core.placement.Placement` into one :class:`WorkerSpec` per
stage replica (plus one :class:`PsSpec` per parameter server of a PS job).
The specs are plain picklable data handed to the Ray actors.

Traffic follows A-SRPT's per-iteration model (§III-B), so the
emulated job moves exactly the bytes that eqs. (5)-(6) count:

* every replica of stage s sends A_s / (k_s k_{s+1}) activation bytes to every
  replica of stage s+1 in the forward pass and receives the same number of
  gradient bytes back (``A_s`` = ``stages[s].profile.out_bytes``, one value per
  boundary);
* the k_s replicas of a stage run a ring all-reduce of h_s =
  ``stages[s].profile.param_bytes`` bytes: 2(k-1) steps of h/k bytes. The ring
  visits the replicas in GPU-id order, so it crosses each server boundary once
  (SJF-BCO eq. 8 / A-SRPT eq. 6 assume one NIC crossing per hop);
* a PS job's worker pushes h / num_ps bytes to every PS and pulls as many back
  (Parrot §2.2).

In ``real`` compute mode the bytes are those of the real tensors instead, and they are the same
numbers when the profile came from the same model and batch: the job's mini-batch is the profiled
one (A_s is one mini-batch's activations, asrpt.md's data-size rule), split sample-wise over the
k_s replicas of each stage, so a replica of stage s computes B / k_s of the B samples and sends
B / (k_s k_{s+1}) samples' activations to each replica of stage s+1. A replica's pass is charged the
stage's profiled time whatever k_s, as A-SRPT eq. (4) charges p^f + p^b per replica.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from raytestbed.core.cluster import Cluster
from raytestbed.core.gpu_types import GpuSpeeds
from raytestbed.core.job import CommPattern, Job, StageProfile
from raytestbed.core.placement import Placement
from raytestbed.core.profile import ModelProfile
from raytestbed.errors import ConfigError

MODES = ("real", "replay")

#: SGD learning rates for real-compute training, per zoo preset (chosen so a
#: few steps on the fixed synthetic batch reduce the loss); others use 0.01.
DEFAULT_LR = {"mlp-tiny": 0.05, "gpt-tiny": 0.5, "gpt-small": 0.05, "resnet-small": 0.05,
              "vgg19-cifar": 0.05, "vgg19-224": 0.001}


@dataclass(frozen=True)
class WorkerSpec:
    """One stage replica of a job (units: seconds, bytes).

    Attributes:
        job_id, stage, replica, gpu: identity and the emulated GPU it runs on.
        rank: index of this worker in the job's worker list (stage-major).
        num_stages: S; replicas: k_s of every stage.
        mode: ``real`` or ``replay``.
        model, seed, lr: zoo preset, weight/data seed and SGD rate (real mode).
        layers: the stage's layer range [start, end) in the model (real mode;
            end -1 = to the last layer).
        global_batch: samples per iteration over the whole job (real mode): the
            profiled mini-batch B (or the job's ``batch_size``), split over each
            stage's k_s replicas (B / k_s samples each; the smallest multiple of B that
            gives every replica a sample where k_s > B, noted in the plan); 0 = the preset's batch size.
        profile: the stage's profiled times and sizes (replay mode holds the GPU
            for ``fwd_s`` / ``bwd_s`` emulated seconds).
        prev_gpus, next_gpus: GPUs of the replicas of stages s-1 / s+1.
        act_out_bytes: replay-mode bytes sent to EACH replica of stage s+1
            (A_s / (k_s k_{s+1})); act_in_bytes likewise from each upstream replica.
        ring: GPUs of this stage's replicas in ring order; ring_pos: our position.
        ps_gpus: fabric endpoints of the parameter servers (PS jobs only).
        iterations, start_iteration: iterations to run, index of the first one.
        compute_factor: real mode: emulated GPU seconds charged per CPU second of this stage's
            forward and backward; None: the stage's profiled time x recent / typical CPU time
            (docs/emulator.md, "Real compute").
        replay_payload_bytes: replay: the largest buffer that really moves for a transfer (None: the
            full profiled size); the fluid model charges the profiled size either way.
        device: real mode: where the stage computes and what a pass's time is
            (:mod:`raytestbed.profile.timers`): ``cpu`` (thread CPU time), ``cuda`` (CUDA event time;
            the CPU, with a warning, where torch sees no CUDA device), ``auto`` (cuda if seen).
        speed: the compute speed factor of the type of ``gpu`` (cluster ``gpu_speed``,
            :mod:`raytestbed.core.gpu_types`): a pass is charged its profiled seconds / ``speed``
            (replay) or its measured charge / ``speed`` (real compute).
    """

    job_id: int
    stage: int
    replica: int
    gpu: int
    rank: int
    num_stages: int
    replicas: tuple[int, ...]
    comm: str
    mode: str
    model: str
    seed: int
    lr: float
    layers: tuple[int, int]
    global_batch: int
    profile: StageProfile
    prev_gpus: tuple[int, ...]
    next_gpus: tuple[int, ...]
    act_in_bytes: int
    act_out_bytes: int
    ring: tuple[int, ...]
    ring_pos: int
    ps_gpus: tuple[int, ...] = ()
    iterations: int = 1
    start_iteration: int = 0
    compute_factor: float | None = None
    replay_payload_bytes: int | None = None
    device: str = "cpu"
    speed: float = 1.0

    @property
    def key(self) -> tuple[int, int]:
        return (self.stage, self.replica)

    @property
    def in_flight(self) -> int:
        """Mini-batches this stage forwards before its first backward (PipeDream 1F1B: S - s)."""
        return self.num_stages - self.stage


@dataclass(frozen=True)
class PsSpec:
    """One parameter server of a PS job: holds shard ``index`` of the parameters."""

    job_id: int
    index: int
    server: int
    gpu: int  #: fabric endpoint (a GPU id of ``server``, see :func:`ps_endpoint`)
    worker_gpus: tuple[int, ...]
    shard_bytes: int
    mode: str
    start_iteration: int = 0
    replay_payload_bytes: int | None = None
    num_ps: int = 1  #: parameter servers of the job (this one included)


@dataclass(frozen=True)
class JobPlan:
    """All workers (and PS tasks) of one job."""

    job_id: int
    comm: str
    mode: str
    workers: tuple[WorkerSpec, ...]
    ps: tuple[PsSpec, ...] = ()
    boundaries: tuple[int, ...] = ()
    notes: tuple[str, ...] = field(default=())


def _check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ConfigError(f"executors: mode must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def find_boundaries(profile: ModelProfile, stages: tuple[StageProfile, ...]) -> list[int]:
    """Start layer of every stage whose summed per-layer profile equals ``stages``.

    Tries :meth:`ModelProfile.even_split` first (what ``traces/jobs.py`` builds),
    then any contiguous split with matching parameter and activation bytes and
    the closest compute. Raises :class:`ConfigError` when none matches.
    """
    n = len(stages)
    if n > profile.num_layers:
        raise ConfigError(f"job model {profile.model!r}: {n} stages but only {profile.num_layers} layers")

    def matches(b: list[int]) -> bool:
        got = profile.stage_profiles(b)
        return all(_close(g.param_bytes, s.param_bytes) and _close(g.out_bytes, s.out_bytes)
                   and _close(g.fwd_s + g.bwd_s, s.fwd_s + s.bwd_s) for g, s in zip(got, stages))

    cand = profile.even_split(n)
    if matches(cand):
        return cand
    # greedy: end each stage where its parameter bytes and cut size match, compute closest
    b, start = [0], 0
    for s, st in enumerate(stages[:-1]):
        best = None
        for end in range(start + 1, profile.num_layers - (n - 1 - s) + 1):
            chunk = profile.layers[start:end]
            if not (_close(sum(l.param_bytes for l in chunk), st.param_bytes)
                    and _close(chunk[-1].out_bytes, st.out_bytes)):
                continue
            err = abs(sum(l.fwd_s + l.bwd_s for l in chunk) - st.compute_s)
            if best is None or err < best[0]:
                best = (err, end)
        if best is None:
            raise ConfigError(f"job model {profile.model!r}: no layer range matches stage {s} "
                              f"(param_bytes {st.param_bytes}, out_bytes {st.out_bytes})")
        start = best[1]
        b.append(start)
    return b


def ps_endpoint(cluster: Cluster, server: int, worker_gpus: set[int]) -> int:
    """The GPU id that stands for a PS task on ``server`` in fabric transfers.

    PS tasks hold no GPU; the fabric addresses endpoints by GPU id, so a PS uses a
    GPU of its server that no worker of the job uses (any GPU of the server if
    all are used: such worker<->PS flows then count as same-GPU, i.e. free).
    """
    gpus = list(cluster.gpus_of(server))
    if not gpus:
        raise ConfigError(f"PS server {server} has no GPU id to address it by")
    for g in gpus:
        if g not in worker_gpus:
            return g
    return gpus[0]


def check_zoo_model(job: Job) -> None:
    """ConfigError (one line naming the job and its model) unless real compute can build ``job.model``:
    a zoo preset (:mod:`raytestbed.models`; imports torch, 2-3 s)."""
    from raytestbed.models import PRESETS

    if job.model not in PRESETS:
        raise ConfigError(f"job {job.job_id}: model {job.model!r} is not a zoo preset "
                          f"(real compute needs one of {', '.join(PRESETS)}); use mode 'replay'")


def plan_job(job: Job, placement: Placement, cluster: Cluster, *, iterations: int, mode: str = "replay",
             start_iteration: int = 0, profile: ModelProfile | None = None,
             speeds: GpuSpeeds | None = None) -> JobPlan:
    """Describe every worker of ``job`` placed by ``placement`` (see the module docstring).

    Args:
        profile: the per-layer profile of ``job.model``; needed in ``real`` mode to
            find the stage layer ranges (``job.extra["boundaries"]`` overrides).
        speeds: the trial's per-type speeds: each worker computes at the factor of its GPU's type
            (:attr:`WorkerSpec.speed`); None: the cluster's ``gpu_speed`` factors.
    """
    speeds = speeds if speeds is not None else GpuSpeeds(cluster)
    _check_mode(mode)
    if iterations < 0:
        raise ConfigError(f"job {job.job_id}: iterations must be >= 0, got {iterations}")
    placement.validate(job, cluster)
    k = job.replicas()
    S = job.num_stages
    notes: list[str] = []
    boundaries: list[int] = []
    num_layers = 0
    if mode == "real":
        check_zoo_model(job)
        if "boundaries" in job.extra:
            boundaries = [int(x) for x in job.extra["boundaries"]]
        elif S == 1:
            boundaries = [0]
        else:
            if profile is None:
                raise ConfigError(f"job {job.job_id}: real mode needs the profile of {job.model!r}")
            boundaries = find_boundaries(profile, tuple(st.profile for st in job.stages))
        num_layers = profile.num_layers if profile is not None else 0
        if len(boundaries) != S:
            raise ConfigError(f"job {job.job_id}: {len(boundaries)} stage boundaries for {S} stages")
    seed = int(job.extra.get("seed", 0))
    lr = float(job.extra.get("lr", DEFAULT_LR.get(job.model, 0.01)))
    global_batch = int(job.extra.get("batch_size", profile.batch_size if profile is not None else 0))
    if mode == "real" and global_batch > 0:
        # a preset profiled at a tiny batch on more replicas (or replica pairs) than samples: the smallest
        # multiple of the batch that gives every replica, and every pair of adjacent-stage replicas, a
        # sample (activation bytes then that multiple of the model's)
        m = 1
        while min(min(c) for c in replica_slices(global_batch * m, k)) == 0:
            m += 1
        if m > 1:
            what = (f"each of {max(k)} replicas of a stage gets one" if S == 1 else
                    "every replica of each stage sends one to every replica of the next")
            notes.append(f"job {job.job_id}: mini-batch {m} x {global_batch} samples so that {what}"
                         + (f"; activations {m}x the model's bytes" if S > 1 else ""))
            global_batch *= m
    workers: list[WorkerSpec] = []
    rank = 0
    for s in range(S):
        gpus = placement.stage_gpus[s]
        ring = tuple(sorted(gpus))
        prof = job.stages[s].profile
        if mode == "real":
            end = boundaries[s + 1] if s + 1 < S else (num_layers or -1)
            layers = (boundaries[s], end)
        else:
            layers = (0, 0)
        for r, g in enumerate(gpus):
            workers.append(WorkerSpec(
                job_id=job.job_id, stage=s, replica=r, gpu=g, rank=rank, num_stages=S, replicas=k,
                comm=job.comm.value, mode=mode, model=job.model, seed=seed, lr=lr, layers=layers,
                global_batch=global_batch, profile=prof,
                prev_gpus=placement.stage_gpus[s - 1] if s > 0 else (),
                next_gpus=placement.stage_gpus[s + 1] if s < S - 1 else (),
                act_in_bytes=int(round(job.pair_bytes(s - 1))) if s > 0 else 0,
                act_out_bytes=int(round(job.pair_bytes(s))) if s < S - 1 else 0,
                ring=ring, ring_pos=ring.index(g), iterations=iterations, start_iteration=start_iteration,
                speed=speeds.gpu_factor(g),
            ))
            rank += 1
    ps: list[PsSpec] = []
    if job.comm is CommPattern.PS:
        wg = placement.stage_gpus[0]
        used = set(wg)
        for i, m in enumerate(placement.ps_servers):
            ep = ps_endpoint(cluster, m, used)
            used.add(ep)
            ps.append(PsSpec(job.job_id, i, m, ep, tuple(wg), int(round(job.ps_shard_bytes())), mode, start_iteration,
                             num_ps=len(placement.ps_servers)))
        workers = [_with_ps(w, tuple(p.gpu for p in ps)) for w in workers]
    return JobPlan(job.job_id, job.comm.value, mode, tuple(workers), tuple(ps), tuple(boundaries), tuple(notes))


def _with_ps(w: WorkerSpec, ps_gpus: tuple[int, ...]) -> WorkerSpec:
    from dataclasses import replace

    return replace(w, ps_gpus=ps_gpus)


def coflow_bytes(kind: str, spec: "WorkerSpec | PsSpec", gradient_bytes: float) -> float:
    """Bytes of one whole coflow of an iteration, every transfer of it (what ``CoflowStarted`` carries):
    ``push`` (every worker sends its ``gradient_bytes``, split over the PSs), ``pull`` (every PS sends
    its sum to every worker: ``gradient_bytes`` = the PSs' shards together), ``ar`` (a stage's ring
    all-reduce: 2(k-1) steps, each moving all k chunks of ``gradient_bytes`` once)."""
    if kind == "push":
        return float(spec.replicas[spec.stage] * gradient_bytes)
    if kind == "pull":
        return float(len(spec.worker_gpus) * gradient_bytes)
    if kind == "ar":
        return float(2 * (len(spec.ring) - 1) * gradient_bytes)
    raise ValueError(f"unknown coflow kind {kind!r} (known: push, pull, ar)")


def replica_slices(batch: int, replicas: tuple[int, ...]) -> list[list[int]]:
    """Samples of a mini-batch of ``batch`` samples as real compute splits them (numpy's
    ``array_split`` order): the first list holds the k_0 stage-0 shards, list s + 1 the
    k_s x k_{s+1} slices stage s sends on (replica r's samples cut in k_{s+1} consecutive parts, part q
    to replica q). A stage-s replica computes the slices it receives, in upstream order."""
    shards = split_sizes(batch, replicas[0])
    out = [shards]
    for k_next in replicas[1:]:
        cuts = [split_sizes(n, k_next) for n in shards]
        out.append([n for c in cuts for n in c])
        shards = [sum(c[q] for c in cuts) for q in range(k_next)]
    return out


def split_sizes(total: int, parts: int) -> list[int]:
    """Sizes of ``np.array_split`` of ``total`` items into ``parts``."""
    q, r = divmod(total, parts)
    return [q + 1] * r + [q] * (parts - r)


def rotated(n: int, start: int) -> list[int]:
    """0..n-1 starting at ``start mod n``: replica r of a stage sends to neighbour r first, so the
    replicas' simultaneous slices go to different receivers (no receiver gets two at once)."""
    return [(start + t) % n for t in range(n)]


def one_f_one_b(in_flight: int, limit: Callable[[], int]) -> Iterator[tuple[str, int]]:
    """PipeDream's 1F1B order for one stage replica: ``("fwd", i)`` while fewer than ``in_flight``
    mini-batches are in flight and more remain, else ``("bwd", j)`` for the oldest one in flight.
    ``limit()``: how many mini-batches the replica runs, asked before each pass (fast-forward may
    lower it while the schedule runs)."""
    nf = j = 0
    while True:
        if nf < limit() and nf < j + in_flight:
            yield "fwd", nf
            nf += 1
        elif j < min(nf, limit()):
            yield "bwd", j
            j += 1
        else:
            return


def ring_chunks(pos: int, k: int, step: int) -> tuple[int, int]:
    """Ring all-reduce over ``k`` replicas, step ``step`` of 2(k-1) at ring position ``pos``: the
    chunk sent to the successor and the chunk received from the predecessor (reduce-scatter for the
    first k-1 steps, then all-gather)."""
    if step < k - 1:
        return (pos - step) % k, (pos - step - 1) % k
    t = step - (k - 1)
    return (pos + 1 - t) % k, (pos - t) % k


class InboundTime:
    """Emulated seconds a stage holds its GPU for its inbound flows: A-SRPT eq. 5 charges a stage the
    time its inbound activations and gradients take, one after the other at the full link rate.

    The GPU is held for the time during which the worker's own inbound flows were moving, each
    moment once: two flows that shared the ingress port (activations from the stage before and
    gradients from the stage after, or slices from two upstream replicas) take twice as long each,
    but over the same interval, so their union — the port's busy time, what eq. 5 counts — is
    charged, not the sum of their spans. A flow slowed by another job's traffic still holds the
    GPU longer. (Inside a server two slices come over their own links at full rate at once: their
    union is shorter than eq. 5's sum.) Time the worker spent in an all-reduce step is marked charged
    (:meth:`cover`): an inbound slice that arrived meanwhile shared the ingress port with the ring and
    lengthened that step by its transfer time already. Spans are ``(start_s, end_s)`` in emulated seconds; they
    may come out of order (a gradient that arrived while the stage computed is taken later), so
    the charged intervals are kept (the last ``keep``, merged; a span older than those is charged
    in full).
    """

    def __init__(self, keep: int = 64) -> None:
        self.keep = keep
        self.charged: list[tuple[float, float]] = []  # disjoint, sorted by start
        self._starts: list[float] = []
        self._ends: list[float] = []

    def charge(self, spans: list[tuple[float, float]]) -> float:
        """Seconds of ``spans`` (their union) not yet charged; records them as charged."""
        new = 0.0
        for a, b in spans:
            lo, hi = self._overlapping(a, b)
            covered = sum(max(0.0, min(b, d) - max(a, c)) for c, d in self.charged[lo:hi])
            new += max(0.0, (b - a) - covered)
            self._add(a, b)
        return new

    def cover(self, a: float, b: float) -> None:
        """The worker held its GPU over ``[a, b]`` for another reason (an all-reduce step through the same
        ingress port): inbound flows during it are not charged again."""
        if b > a:
            self._add(a, b)

    def shift(self, dt: float) -> None:
        """The charged intervals move ``dt`` seconds later (the simulator's fast-forward)."""
        self.charged = [(a + dt, b + dt) for a, b in self.charged]
        self._starts = [c for c, _ in self.charged]
        self._ends = [d for _, d in self.charged]

    def _overlapping(self, a: float, b: float) -> tuple[int, int]:
        """Slice of the charged intervals that touch [a, b] (they are disjoint: ends ascend with starts)."""
        lo = bisect.bisect_left(self._ends, a)
        hi = bisect.bisect_right(self._starts, b)
        return lo, max(lo, hi)

    def _add(self, a: float, b: float) -> None:
        lo, hi = self._overlapping(a, b)
        if hi > lo:
            a, b = min(a, self.charged[lo][0]), max(b, self.charged[hi - 1][1])
        self.charged[lo:hi] = [(a, b)]
        self._starts[lo:hi] = [a]
        self._ends[lo:hi] = [b]
        if len(self.charged) > self.keep:
            cut = len(self.charged) - self.keep
            del self.charged[:cut], self._starts[:cut], self._ends[:cut]
