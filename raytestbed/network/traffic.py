"""Per-iteration traffic of a placed job, as coflows (impl.).

One iteration of a job is a compute phase followed by one or more coflows:

* pipeline job (A-SRPT), with ``timing.schedule: coflows`` (by default the flow simulator runs
  pipelines worker by worker, :mod:`raytestbed.sim.pipeline_workers`): for every stage boundary
  s -> s+1 and every replica pair (a, b), A_s / (k_s k_{s+1}) bytes a -> b (activations) and the
  same back b -> a (gradients), then the all-reduce ring of every stage with k >= 2
  replicas: each ring hop r -> r+1 carries 2(k-1)h/k bytes (A-SRPT §III-B;
  ring and tree all-reduce move the same volume per replica, so both are sent
  as a ring here). A stage is charged its transfers as A-SRPT eq. (5) and the
  emulator's stage workers have it: its inbound transfers (activations from the
  stage before, gradients from the stage after) at once -- inbound flows that
  overlap hold the GPU once -- and its own activations and gradients out one
  after the other, the all-reduce last. So the iteration's coflows are the
  inbound transfers of stages 0, 3, 6, ..., of stages 1, 4, 7, ..., of stages
  2, 5, 8, ..., then the rings (empty ones left out): stage s's inbound is one
  coflow, its activations out are in stage s+1's and its gradients out in
  stage s-1's, three different coflows, while stages three apart move at once.
  (Slices between the replicas of two stages move at once; at most four
  coflows per iteration keep the simulator fast.)
* ring-all-reduce job (SJF-BCO, GADGET): one coflow, each hop 2(w-1)m/w bytes;
* parameter-server job (Parrot): a push coflow (every worker -> every PS, h/#PS
  bytes) then a pull coflow (every PS -> every worker): a PS job whose flow sizes are drawn at
  random (Parrot §6.1) always, another one only with ``timing.schedule: coflows`` (by default the
  flow simulator runs it worker by worker).

Flows of one coflow between the same pair of *different* servers are merged
into one flow (one connection per server pair). Flows inside one server (``src
== dst``) are kept one per GPU pair, unmerged: each is capped by the
intra-server bandwidth on its own and they do not contend (``core/cluster.py``:
B_intra is point-to-point), as
the emulator's fabric paces them. (Merging them made k same-server ring hops
one flow of k times the bytes at one B_intra: k times too slow.)

A job's :attr:`Job.traffic` (:class:`~raytestbed.core.job.JobTraffic`) overrides
this: explicit coflows with absolute servers, an explicit compute time, or PS
flows of random size U(0, L] drawn afresh for every coflow (Parrot §6.1; when
several worker-PS pairs share a server pair the merged flow's size is
(pairs x L) x one U(0, 1] draw).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from raytestbed.core.cluster import Cluster
from raytestbed.core.job import CommPattern, Job
from raytestbed.core.placement import Placement
from raytestbed.core.timing import ps_coflows, ring_allreduce_bytes

Flow = tuple[int, int, float]  #: (src server, dst server, bytes)


@dataclass(frozen=True, slots=True)
class IterationTraffic:
    """What one iteration of a placed job does.

    Attributes:
        compute_s: compute time before the first coflow, seconds. For a pipeline
            job the slowest stage's p^f + p^b (asynchronous pipeline: the
            bottleneck stage sets the pace, A-SRPT §III-B).
        coflows: the coflows, in order; each is a list of merged flows.
    """

    compute_s: float
    coflows: tuple[tuple[Flow, ...], ...]
    random_sizes: bool = False
    seed: tuple[int, ...] = ()
    #: each coflow as (src, dst, bytes) arrays (the same flows as ``coflows``); built if not given
    arrays: tuple = ()

    def __post_init__(self) -> None:
        if not self.arrays:
            object.__setattr__(self, "arrays", tuple(_as_arrays(cf) for cf in self.coflows))

    def coflow_arrays(self, cycle: int, idx: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`coflow` as (src server, dst server, bytes) arrays (the same numbers)."""
        src, dst, b = self.arrays[idx]
        if not self.random_sizes or not b.size:
            return src, dst, b
        u = 1.0 - np.random.default_rng((*self.seed, cycle, idx)).random(b.size)  # in (0, 1]
        return src, dst, b * u

    def coflow(self, cycle: int, idx: int) -> tuple[Flow, ...]:
        """The flows of coflow ``idx`` of iteration ``cycle`` (bytes drawn per coflow if random)."""
        cf = self.coflows[idx]
        if not self.random_sizes or not cf:
            return cf
        u = 1.0 - np.random.default_rng((*self.seed, cycle, idx)).random(len(cf))  # in (0, 1]
        return tuple((s, d, b * float(x)) for (s, d, b), x in zip(cf, u))

    @property
    def bytes(self) -> float:
        return sum(b for cf in self.coflows for _, _, b in cf)


def _as_arrays(cf: tuple[Flow, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(cf)
    return (np.fromiter((f[0] for f in cf), dtype=np.int64, count=n),
            np.fromiter((f[1] for f in cf), dtype=np.int64, count=n),
            np.fromiter((f[2] for f in cf), dtype=float, count=n))


def _merge_arrays(src: np.ndarray, dst: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_merge` on arrays: the same flows (sums in input order), sorted by (src, dst, bytes)."""
    keep = b > 0
    src, dst, b = src[keep], dst[keep], b[keep]
    intra = src == dst
    n = int(max(src.max(initial=0), dst.max(initial=0))) + 1
    key = src[~intra] * n + dst[~intra]
    pairs, inv = np.unique(key, return_inverse=True)
    sums = np.bincount(inv, weights=b[~intra], minlength=pairs.size)
    s = np.concatenate([src[intra], pairs // n])
    d = np.concatenate([dst[intra], pairs % n])
    v = np.concatenate([b[intra], sums])
    order = np.lexsort((v, d, s))
    return s[order], d[order], v[order]


def _merge(flows: list[Flow]) -> tuple[Flow, ...]:
    """Merge cross-server flows per (src, dst) server pair; keep same-server flows one per GPU pair."""
    acc: dict[tuple[int, int], float] = {}
    intra: list[Flow] = []
    for s, d, b in flows:
        if b <= 0:
            continue
        if s == d:
            intra.append((s, d, b))
        else:
            acc[(s, d)] = acc.get((s, d), 0.0) + b
    return tuple(sorted(intra + [(s, d, b) for (s, d), b in acc.items()]))


def _ring(servers: list[int], hop_bytes: float) -> list[Flow]:
    k = len(servers)
    if k < 2:
        return []
    return [(servers[r], servers[(r + 1) % k], hop_bytes) for r in range(k)]


def iteration_traffic(job: Job, placement: Placement, cluster: Cluster) -> IterationTraffic:
    """The compute time and coflows of one iteration of ``job`` placed at ``placement``."""
    srv = [[cluster.server_of(g) for g in gpus] for gpus in placement.stage_gpus]
    spec = job.traffic
    compute = None if spec is None else spec.compute_s
    if spec is not None and spec.coflows:
        n_srv = cluster.num_servers
        arrays = []
        for k, cf in enumerate(spec.coflows):
            src, dst, b = _as_arrays(cf)
            bad = (src < 0) | (src >= n_srv) | (dst < 0) | (dst >= n_srv)
            if bad.any():
                i = int(np.argmax(bad))
                raise ValueError(f"job {job.job_id}: coflow {k} names server {max(int(src[i]), int(dst[i]))}, "
                                 f"the cluster has {n_srv}")
            arrays.append(_merge_arrays(src, dst, b))
        if compute is None:
            compute = max(st.profile.compute_s for st in job.stages)
        coflows = tuple(tuple(zip(s.tolist(), d.tolist(), v.tolist())) for s, d, v in arrays)
        return IterationTraffic(compute, coflows, arrays=tuple(arrays))
    if job.comm is CommPattern.PS:
        random_sizes = spec is not None and spec.max_flow_bytes is not None
        push, pull = ps_coflows(job, placement, cluster, spec.max_flow_bytes if random_sizes else None)
        return IterationTraffic(job.stages[0].profile.compute_s if compute is None else compute,
                                (_merge(push), _merge(pull)), random_sizes,
                                (spec.seed, job.job_id) if random_sizes else ())
    inbound: tuple[list[Flow], ...] = ([], [], [])  # transfers into the stages s with s % 3 == 0, 1, 2
    rings: list[Flow] = []
    for s, st in enumerate(job.stages):
        k = st.replicas
        rings += _ring(srv[s], ring_allreduce_bytes(st.profile.param_bytes, k))
        if s + 1 < job.num_stages:
            per_pair = job.pair_bytes(s)
            for a in srv[s]:
                for b in srv[s + 1]:
                    inbound[(s + 1) % 3].append((a, b, per_pair))  # activations into stage s+1
                    inbound[s % 3].append((b, a, per_pair))  # gradients into stage s
    if compute is None:
        compute = max(st.profile.compute_s for st in job.stages)
    coflows = (*(_merge(fl) for fl in inbound), _merge(rings))
    return IterationTraffic(compute, tuple(cf for cf in coflows if cf))
