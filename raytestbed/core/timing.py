"""Analytic per-iteration time models of the papers, each in one place.

These are *estimators*: policies use them to predict iteration times, the
simulator's ``analytic`` timing mode uses them as ground truth, and fidelity
checks compare measured times against them. Contention that emerges from shared
links is computed elsewhere (``raytestbed.network``).

* A-SRPT eqs. (4)-(7): :func:`asrpt_stage_times`, :func:`asrpt_iteration_time`,
  :func:`asrpt_alpha_max`, :func:`asrpt_alpha_min_tilde`.
* SJF-BCO eq. (8) with contention count p_j (eq. 6), k_j = xi1 p_j (eq. 7),
  degradation f(alpha, k) and overhead gamma = xi2 #servers:
  :func:`sjfbco_iteration_time`, :func:`sjfbco_contention_count`.
* GADGET eq. (1): :func:`gadget_iteration_time`.
* Parameter-server jobs: compute + push and pull coflows at their stand-alone
  optimum (Parrot eqs. 26-27): :func:`ps_iteration_time`.

All times in seconds, sizes in bytes, bandwidths in bytes/s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from raytestbed.core.cluster import Cluster
from raytestbed.core.job import CommPattern, Job
from raytestbed.core.placement import Counts, Placement
from raytestbed.core.o3 import o3_cct

# ---------------------------------------------------------------------------
# A-SRPT, eqs. (4)-(7)
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StageTime:
    """beta^m_{i,s} and its parts for stage ``stage`` on server ``server`` (seconds)."""

    server: int
    stage: int
    comp: float
    comm: float
    allreduce: float

    @property
    def total(self) -> float:
        return self.comp + self.comm + self.allreduce


def ring_allreduce_bytes(param_bytes, k):
    """Bytes each replica sends in a ring all-reduce of ``param_bytes`` over ``k`` replicas:
    2(k-1)h/k (reduce-scatter then all-gather, 2(k-1) steps of h/k; A-SRPT eq. (6)'s volume).
    ``k`` may be an array (one volume per k)."""
    return 2.0 * (k - 1) * param_bytes / k


def asrpt_stage_times(
    job: Job,
    counts: Mapping[int, Sequence[int]],
    g: int | Mapping[int, int],
    b_inter: float,
    b_intra: float,
    bwd_coef: float = 1.0,
    allreduce_coef: float = 1.0,
) -> list[StageTime]:
    """beta^m_{i,s} = comp + comm + AllReduce for every (server, stage) with x^m_{i,s} > 0.

    Implements A-SRPT eq. (4) comp = p^f + p^b; eq. (5) comm =
    g (E_in + E_out) / B_inter + (L_in + L_out) / B_intra, dropping the missing
    neighbour's terms for the first and last stage; eq. (6)
    AllReduce = 2(k-1)h / (k (x/g) B_inter) if some replicas are elsewhere, else
    2(k-1)h / (k B_intra). ``bwd_coef`` and ``allreduce_coef`` are the optional
    overlap coefficients of §III-B (default 1: no overlap).

    Args:
        counts: server -> x_s for every stage (x^m_{i,s}).
        g: GPUs per server; b_inter: NIC bandwidth B_inter; b_intra: B_intra. On a cluster whose servers
            differ, ``g`` maps server -> g_m and eqs. (5)-(6) use the g_m of the server the replicas are
            on (each GPU owns B_inter / g_m of its server's NIC): the extension of the paper's identical
            servers that the simulator's ``asrpt`` timing uses there.
    """
    k = job.replicas()
    n = len(k)
    out: list[StageTime] = []
    per_server = g if isinstance(g, Mapping) else None
    for m, x in counts.items():
        if per_server is not None:
            g = per_server[m]
        for s in range(n):
            xs = x[s]
            if xs <= 0:
                continue
            p = job.stages[s].profile
            comp = p.fwd_s + bwd_coef * p.bwd_s
            e_in = l_in = e_out = l_out = 0.0
            if s > 0:
                d_in = job.d_in(s)
                e_in = 2.0 * d_in * (k[s - 1] - x[s - 1]) / k[s - 1]
                l_in = 2.0 * d_in * x[s - 1] / k[s - 1]
            if s < n - 1:
                d_out = job.d_out(s)
                e_out = 2.0 * d_out * (k[s + 1] - x[s + 1]) / k[s + 1]
                l_out = 2.0 * d_out * x[s + 1] / k[s + 1]
            comm = g * (e_in + e_out) / b_inter + (l_in + l_out) / b_intra
            ar = 0.0
            if k[s] > 1:
                vol = ring_allreduce_bytes(p.param_bytes, k[s])
                ar = vol / ((xs / g) * b_inter) if xs < k[s] else vol / b_intra
            out.append(StageTime(m, s, comp, comm, allreduce_coef * ar))
    return out


def asrpt_iteration_time(
    job: Job,
    counts: Mapping[int, Sequence[int]],
    g: int | Mapping[int, int],
    b_inter: float,
    b_intra: float,
    bwd_coef: float = 1.0,
    allreduce_coef: float = 1.0,
) -> float:
    """alpha_i = max over (m, s) with x^m_{i,s} > 0 of beta^m_{i,s} (A-SRPT eq. 7), seconds."""
    times = asrpt_stage_times(job, counts, g, b_inter, b_intra, bwd_coef, allreduce_coef)
    if not times:
        raise ValueError(f"job {job.job_id}: empty placement")
    return max(t.total for t in times)


def asrpt_alpha_max(job: Job, g: int, b_inter: float, b_intra: float) -> float:
    """alpha^max_i: eq. (7) with every replica alone on its own server (A-SRPT §III-B)."""
    counts: Counts = {}
    m = 0
    n = job.num_stages
    for s, st in enumerate(job.stages):
        for _ in range(st.replicas):
            x = [0] * n
            x[s] = 1
            counts[m] = x
            m += 1
    return asrpt_iteration_time(job, counts, g, b_inter, b_intra)


def fewest_servers_layout(gpus: int, g: int) -> list[int]:
    """GPUs per server when a g_i-GPU job sits on the fewest servers (A-SRPT §IV-B).

    floor(g_i/g) full servers, plus one server with the remainder if any.
    """
    full, rest = divmod(gpus, g)
    return [g] * full + ([rest] if rest else [])


Mapper = Callable[[Job, Sequence[int]], list[list[int]]]
"""A GPU mapper: (job, GPUs available on each chosen server) -> per server, x_s per stage."""


def contiguous_mapper(job: Job, capacities: Sequence[int]) -> list[list[int]]:
    """Fill the servers in order with the replicas in stage order (no graph partitioning).

    A simple stand-in for Heavy-Edge; used when no better mapper is given.
    """
    n = job.num_stages
    out = [[0] * n for _ in capacities]
    si, left = 0, job.stages[0].replicas
    for mi, cap in enumerate(capacities):
        while cap > 0 and si < n:
            take = min(cap, left)
            out[mi][si] += take
            cap -= take
            left -= take
            if left == 0:
                si += 1
                left = job.stages[si].replicas if si < n else 0
    if si < n:
        raise ValueError(f"job {job.job_id}: capacities hold {sum(capacities)} GPUs, needs {job.gpus}")
    return out


def asrpt_alpha_min_tilde(
    job: Job, g: int, b_inter: float, b_intra: float, mapper: Mapper = contiguous_mapper
) -> float:
    """alpha~^min_i: eq. (7) on the fewest-servers layout, replicas mapped by ``mapper`` (A-SRPT §IV-B)."""
    layout = fewest_servers_layout(job.gpus, g)
    per_server = mapper(job, layout)
    counts = {m: x for m, x in enumerate(per_server)}
    return asrpt_iteration_time(job, counts, g, b_inter, b_intra)


# ---------------------------------------------------------------------------
# SJF-BCO, eqs. (6)-(8)
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SjfbcoParams:
    """Constants of SJF-BCO's model.

    Attributes:
        xi1: contention constant, k_j = xi1 * p_j (eq. 7), in (0, 1].
        xi2_s: overhead per server used, seconds (gamma = xi2 * #servers).
        degradation_alpha: alpha of the linear degradation f(alpha, k) = k + alpha (k - 1).
        reduction_bps: C, bytes reduced per second by one GPU.
    """

    xi1: float = 1.0
    xi2_s: float = 0.0
    degradation_alpha: float = 1.0
    reduction_bps: float = math.inf

    def __post_init__(self) -> None:
        for name in ("xi1", "xi2_s", "degradation_alpha"):
            if not getattr(self, name) >= 0:  # NaN fails too
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not self.reduction_bps > 0:
            raise ValueError(f"reduction_bps must be > 0, got {self.reduction_bps!r}")


def sjfbco_degradation(k: float, alpha: float) -> float:
    """f(alpha, k) = k + alpha (k - 1): the paper's linear example; f(alpha, 1) = 1."""
    return k + alpha * (k - 1.0)


def sjfbco_contention_count(
    job_id: int, servers_of: Mapping[int, Mapping[int, int]], gpus_of: Mapping[int, int]
) -> int:
    """p_j (SJF-BCO eq. 6): most split jobs (j included) on any of j's servers.

    A job is *split* on server s when 0 < y_{js} < G_j. Only split jobs share a
    server's inter-server link; p_j = 0 when job j itself is not split.

    Args:
        job_id: j.
        servers_of: running job -> {server: GPUs of that job there}.
        gpus_of: running job -> G_j.
    """
    mine = servers_of[job_id]
    if len(mine) <= 1:
        return 0
    best = 0
    for s in mine:
        cnt = 0
        for other, per in servers_of.items():
            y = per.get(s, 0)
            if 0 < y < gpus_of[other]:
                cnt += 1
        best = max(best, cnt)
    return best


def sjfbco_iteration_time(
    job: Job,
    num_servers: int,
    contention: int,
    b_inter: float,
    b_intra: float,
    params: SjfbcoParams = SjfbcoParams(),
) -> float:
    """tau_j (SJF-BCO eq. 8), seconds, for a ring-all-reduce job.

    tau = (m/w) 2(w-1) / B + (m/w)(w-1) / C + gamma + FP + BP, with
    B = b_intra on one server, else b_inter / f(alpha, k) with k = max(1, xi1 p_j)
    (clamped), and gamma = xi2 * #servers. m = gradient bytes of the
    job's stage, w = its workers, FP = ``fwd_s`` (the whole mini-batch, Delta^f M),
    BP = ``bwd_s``.
    """
    st = job.stages[0]
    w = st.replicas
    m = st.profile.param_bytes
    if num_servers <= 1:
        bw = b_intra
    else:
        k = max(1.0, params.xi1 * contention)
        bw = b_inter / sjfbco_degradation(k, params.degradation_alpha)
    ring = (m / w) * 2 * (w - 1) / bw if w > 1 else 0.0
    reduce = (m / w) * (w - 1) / params.reduction_bps if w > 1 else 0.0
    gamma = params.xi2_s * num_servers
    return ring + reduce + gamma + st.profile.fwd_s + st.profile.bwd_s


# ---------------------------------------------------------------------------
# GADGET, eq. (1)
# ---------------------------------------------------------------------------


def gadget_iteration_time(
    grad_bytes: float,
    workers: int,
    bandwidth_bps: float,
    reduction_bps: float,
    fwd_s: float,
    bwd_s: float,
    overhead_s: float = 0.0,
) -> float:
    """tau = d (w-1)/w [2/b + 1/G_c] + t^f M + t^b + gamma (GADGET eq. 1), seconds.

    ``fwd_s`` is the forward time of the whole mini-batch (t^f M); ``reduction_bps``
    is G_c in bytes/s; ``bandwidth_bps`` is b between neighbouring workers.
    """
    if workers < 1:
        raise ValueError("workers must be >= 1")
    frac = grad_bytes * (workers - 1) / workers
    return frac * (2.0 / bandwidth_bps + 1.0 / reduction_bps) + fwd_s + bwd_s + overhead_s


# ---------------------------------------------------------------------------
# Parameter-server jobs (Parrot's model)
# ---------------------------------------------------------------------------


def ps_coflows(job: Job, placement: Placement, cluster: Cluster, share: float | None = None) -> tuple[list, list]:
    """Push and pull flows (src server, dst server, bytes) of one PS iteration (Parrot §2.2, §6.1).

    Every worker sends h/num_ps bytes to every PS (push, all-to-all) and every PS
    sends h/num_ps bytes back to every worker (pull), h = gradient bytes; ``share`` (bytes) replaces
    h/num_ps (a trace's flow-size bound, Parrot §6.1).
    """
    if share is None:
        share = job.ps_shard_bytes()
    workers = [cluster.server_of(g) for g in placement.stage_gpus[0]]
    push = [(w, p, share) for w in workers for p in placement.ps_servers]
    pull = [(p, w, share) for p in placement.ps_servers for w in workers]
    return push, pull


def ps_iteration_time(job: Job, placement: Placement, cluster: Cluster) -> float:
    """Compute + stand-alone optimal push CCT + pull CCT (Parrot eqs. 26-27), seconds.

    This is the per-iteration lower bound of Parrot's Theorem 3 for one job.
    """
    push, pull = ps_coflows(job, placement, cluster)
    egress = {s.server_id: s.nic_egress_bps for s in cluster.servers}
    ingress = {s.server_id: s.nic_ingress_bps for s in cluster.servers}
    p = job.stages[0].profile
    return p.fwd_s + p.bwd_s + o3_cct(push, egress, ingress) + o3_cct(pull, egress, ingress)


# ---------------------------------------------------------------------------
# Iteration-time models used by the simulator's analytic mode
# ---------------------------------------------------------------------------


class IterationModel:
    """Maps a placed job (and, for contention models, the other running jobs) to seconds per step
    (per iteration; a job with ``worker_iterations`` completes ``iterations_per_step()`` per step).

    ``contention_dependent`` tells the simulator to re-evaluate every running job
    whenever a job starts or ends.
    """

    name = "base"
    contention_dependent = False

    def iteration_time(
        self, job: Job, placement: Placement, cluster: Cluster, running: Mapping[int, tuple[Job, Placement]]
    ) -> float:
        raise NotImplementedError


class AsrptModel(IterationModel):
    """A-SRPT eq. (7) for pipeline and data-parallel jobs; PS jobs use :func:`ps_iteration_time`.

    No cross-job contention: each GPU owns B_inter / g of its NIC (A-SRPT §III-A). The paper's
    servers are identical; where they differ, each GPU owns B_inter / g_m of its own server's NIC
    (eqs. 5-6 with the g_m of each server, :func:`asrpt_stage_times`).
    """

    name = "asrpt"

    def __init__(self) -> None:
        #: (stages, per-server counts as a sorted tuple, g, B_inter, B_intra) -> alpha, seconds: on identical
        #: servers eq. (7) depends on how many replicas of each stage share a server, not on which server
        self._alpha: dict[tuple, float] = {}

    def iteration_time(self, job, placement, cluster, running):
        if job.comm is CommPattern.PS:
            return ps_iteration_time(job, placement, cluster)
        counts = placement.counts(cluster)
        if not cluster.identical_servers:
            return asrpt_iteration_time(job, counts, cluster.gpus_of_server(), cluster.nic_bps, cluster.intra_bps)
        g = cluster.gpus_per_server
        key = (job.stages, tuple(sorted(tuple(x) for x in counts.values())), g, cluster.nic_bps, cluster.intra_bps)
        alpha = self._alpha.get(key)
        if alpha is None:
            if len(self._alpha) > 100_000:
                self._alpha.clear()
            alpha = self._alpha[key] = asrpt_iteration_time(job, counts, g, cluster.nic_bps, cluster.intra_bps)
        return alpha


class SjfbcoModel(IterationModel):
    """SJF-BCO eq. (8) for single-stage jobs, with contention from the running split jobs."""

    name = "sjfbco"
    contention_dependent = True

    def __init__(self, params: SjfbcoParams = SjfbcoParams()) -> None:
        self.params = params
        self._per_server: dict[tuple[int, Placement], dict[int, int]] = {}

    def _servers(self, placement: Placement, cluster: Cluster) -> dict[int, int]:
        """placement.gpus_per_server(cluster), memoised (the simulator re-prices every running job often)."""
        key = (id(cluster), placement)
        hit = self._per_server.get(key)
        if hit is None:
            if len(self._per_server) > 100_000:
                self._per_server.clear()
            hit = self._per_server[key] = placement.gpus_per_server(cluster)
        return hit

    def iteration_time(self, job, placement, cluster, running):
        if job.num_stages != 1:
            raise ValueError(f"job {job.job_id}: the sjfbco model needs single-stage (data-parallel) jobs")
        mine = self._servers(placement, cluster)
        if len(mine) <= 1:  # not split: no contention (eq. 6 gives p_j = 0)
            return sjfbco_iteration_time(job, len(mine), 0, cluster.nic_bps, cluster.intra_bps, self.params)
        servers_of = {jid: self._servers(pl, cluster) for jid, (_, pl) in running.items()}
        gpus_of = {jid: j.gpus for jid, (j, _) in running.items()}
        servers_of[job.job_id] = mine
        gpus_of[job.job_id] = job.gpus
        p = sjfbco_contention_count(job.job_id, servers_of, gpus_of)
        return sjfbco_iteration_time(
            job, len(mine), p, cluster.nic_bps, cluster.intra_bps, self.params
        )


class GadgetModel(IterationModel):
    """GADGET eq. (1): seconds per step of the ring, b = B_intra on one server, else the NIC bandwidth.

    A job whose ``iterations`` count worker-iterations (``Job.worker_iterations``, GADGET §VI
    ``budget_mode``) completes w of them per step; the simulator credits them
    (:meth:`raytestbed.core.job.Job.iterations_per_step`), as every backend does.
    """

    name = "gadget"

    def __init__(self, reduction_bps: float = math.inf, overhead_s: float = 0.0) -> None:
        if not reduction_bps > 0:  # NaN fails too
            raise ValueError(f"reduction_bps must be > 0, got {reduction_bps!r}")
        if not overhead_s >= 0:
            raise ValueError(f"overhead_s must be >= 0, got {overhead_s!r}")
        self.reduction_bps = reduction_bps
        self.overhead_s = overhead_s

    def iteration_time(self, job, placement, cluster, running):
        if job.num_stages != 1:
            raise ValueError(f"job {job.job_id}: the gadget model needs single-stage (data-parallel) jobs")
        st = job.stages[0]
        b = cluster.intra_bps if len(placement.servers(cluster)) == 1 else cluster.nic_bps
        return gadget_iteration_time(
            st.profile.param_bytes, st.replicas, b, self.reduction_bps, st.profile.fwd_s, st.profile.bwd_s,
            self.overhead_s,
        )


def make_iteration_model(name: str, **params) -> IterationModel:
    """Build an analytic model by name: ``asrpt`` (default), ``sjfbco`` or ``gadget``."""
    if name in ("asrpt", "auto"):
        return AsrptModel()
    if name == "sjfbco":
        return SjfbcoModel(SjfbcoParams(**params))
    if name == "gadget":
        return GadgetModel(**params)
    raise ValueError(f"unknown analytic model {name!r} (known: asrpt, sjfbco, gadget)")
