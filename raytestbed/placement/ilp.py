"""Optimal GPU mapping of one job by integer linear programming (HiGHS).

The reference Heavy-Edge is measured against (A-SRPT §V-B-2-e, Table II): for a
job with a fixed configuration (S stages, k_s replicas) and a set of servers
with c_m free GPUs each, find the counts x^m_s (replicas of stage s on server m)
that minimise the per-iteration time alpha of A-SRPT eq. (7).

Formulation (exact for eq. 7, which depends on the placement only through the
counts x^m_s; the paper's ILP follows its ref. [47] and was solved with Gurobi,
this one is solved with HiGHS through :func:`scipy.optimize.milp`):

* binaries z[m,s,v], v = 1..min(k_s, c_m): "server m holds exactly v replicas of
  stage s"; sum_v z[m,s,v] <= 1, so x^m_s = sum_v v z[m,s,v] and the indicator
  y[m,s] = [x^m_s > 0] = sum_v z[m,s,v];
* every replica placed (eq. 2): sum_m x^m_s = k_s;
* capacity: sum_s x^m_s <= c_m (``exact=True``: = c_m, i.e. the job takes exactly
  the offered GPUs, as Heavy-Edge does);
* alpha >= beta^m_s - U_s (1 - y[m,s]) for every (m, s), where beta^m_s =
  comp_s (eq. 4) + comm (eq. 5, linear in x^m_{s-1}, x^m_{s+1}) + AllReduce
  (eq. 6, a constant per value v, so linear in z) and U_s is an upper bound of
  beta^m_s over all placements (big-M; the constraint is void when y = 0);
* minimise alpha (eq. 7: the max of beta over the (m, s) with x > 0).

Units: seconds, bytes, bytes/s. :func:`brute_force_placement` enumerates every
count matrix (small instances only) and is the test oracle.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import lil_matrix

from raytestbed.core.job import Job
from raytestbed.core.timing import Mapper, asrpt_iteration_time, ring_allreduce_bytes


@dataclass(frozen=True)
class IlpResult:
    """Optimal counts and their eq. (7) time.

    Attributes:
        counts: per offered server (in input order), x_s for every stage.
        alpha_s: eq. (7) per-iteration time of ``counts``, seconds (recomputed
            with :func:`~raytestbed.core.timing.asrpt_iteration_time`).
        objective_s: the MILP's optimal objective, seconds (= ``alpha_s`` up to
            solver tolerance).
        wall_s: solver wall time, seconds.
        status: HiGHS status message.
    """

    counts: list[list[int]]
    alpha_s: float
    objective_s: float
    wall_s: float
    status: str


def solve_placement_ilp(job: Job, capacities: Sequence[int], g: int, b_inter: float, b_intra: float,
                        exact: bool = True, time_limit_s: float | None = None,
                        bwd_coef: float = 1.0, allreduce_coef: float = 1.0) -> IlpResult:
    """Minimise A-SRPT eq. (7) over the counts x^m_s (see the module docstring).

    Args:
        job: the job (stages with replicas k_s and stage profiles).
        capacities: free GPUs c_m on each offered server (each <= g).
        g: GPUs per server; b_inter: NIC bandwidth B_inter; b_intra: B_intra (bytes/s).
        exact: use exactly c_m GPUs on every server (requires sum c_m = g_i);
            otherwise at most c_m.
        time_limit_s: optional HiGHS time limit (the result is then the incumbent).

    Raises:
        ValueError: if the job does not fit (or, with ``exact``, does not match) the capacities,
            or HiGHS finds no solution.
    """
    caps = [int(c) for c in capacities]
    k = list(job.replicas())
    S = len(k)
    M = len(caps)
    if any(c < 0 or c > g for c in caps):
        raise ValueError(f"capacities must be in 0..{g}: {caps}")
    if exact and sum(caps) != job.gpus:
        raise ValueError(f"job {job.job_id}: exact placement needs sum(capacities) = {job.gpus}, got {sum(caps)}")
    if sum(caps) < job.gpus:
        raise ValueError(f"job {job.job_id}: capacities hold {sum(caps)} GPUs, needs {job.gpus}")

    # ---- per-stage constants of eqs. (4)-(6)
    comp = [job.stages[s].profile.fwd_s + bwd_coef * job.stages[s].profile.bwd_s for s in range(S)]
    k0 = [0.0] * S   # comm with every neighbour off-server
    a_in = [0.0] * S  # d comm / d x^m_{s-1}
    a_out = [0.0] * S  # d comm / d x^m_{s+1}
    for s in range(S):
        if s > 0:
            d = job.d_in(s)
            k0[s] += g * 2.0 * d / b_inter
            a_in[s] = (2.0 * d / k[s - 1]) * (1.0 / b_intra - g / b_inter)
        if s < S - 1:
            d = job.d_out(s)
            k0[s] += g * 2.0 * d / b_inter
            a_out[s] = (2.0 * d / k[s + 1]) * (1.0 / b_intra - g / b_inter)

    def ar(s: int, v: int) -> float:
        if k[s] <= 1:
            return 0.0
        vol = ring_allreduce_bytes(job.stages[s].profile.param_bytes, k[s])
        return allreduce_coef * (vol / ((v / g) * b_inter) if v < k[s] else vol / b_intra)

    # ---- variables: z[m,s,v] then alpha
    zidx: dict[tuple[int, int, int], int] = {}
    for m in range(M):
        for s in range(S):
            for v in range(1, min(k[s], caps[m]) + 1):
                zidx[(m, s, v)] = len(zidx)
    n = len(zidx) + 1
    ia = n - 1
    upper = [comp[s] + k0[s] + max(0.0, a_in[s] * (k[s - 1] if s > 0 else 0))
             + max(0.0, a_out[s] * (k[s + 1] if s < S - 1 else 0))
             + max((ar(s, v) for v in range(1, k[s] + 1)), default=0.0) for s in range(S)]

    rows: list[tuple[dict[int, float], float, float]] = []
    for s in range(S):  # every replica placed
        rows.append(({zidx[(m, s, v)]: float(v) for m in range(M) for v in range(1, min(k[s], caps[m]) + 1)},
                     k[s], k[s]))
    for m in range(M):
        cap_row = {zidx[(m, s, v)]: float(v) for s in range(S) for v in range(1, min(k[s], caps[m]) + 1)}
        rows.append((cap_row, caps[m] if exact else 0.0, caps[m]))
        for s in range(S):
            vs = range(1, min(k[s], caps[m]) + 1)
            if not vs:
                continue
            rows.append(({zidx[(m, s, v)]: 1.0 for v in vs}, 0.0, 1.0))  # at most one count value
            # alpha - a_in x_{s-1} - a_out x_{s+1} - sum_v (ar(v) + U) z_v >= comp + k0 - U
            r: dict[int, float] = {ia: 1.0}
            for v in vs:
                r[zidx[(m, s, v)]] = -(ar(s, v) + upper[s])
            for nb, coef in ((s - 1, a_in[s]), (s + 1, a_out[s])):
                if 0 <= nb < S and coef != 0.0:
                    for v in range(1, min(k[nb], caps[m]) + 1):
                        key = zidx[(m, nb, v)]
                        r[key] = r.get(key, 0.0) - coef * v
            rows.append((r, comp[s] + k0[s] - upper[s], np.inf))
    A = lil_matrix((len(rows), n))
    lb = np.empty(len(rows))
    ub = np.empty(len(rows))
    for i, (r, lo, hi) in enumerate(rows):
        for j, v in r.items():
            A[i, j] = v
        lb[i], ub[i] = lo, hi
    c = np.zeros(n)
    c[ia] = 1.0
    integrality = np.ones(n)
    integrality[ia] = 0
    lo_b = np.zeros(n)
    hi_b = np.ones(n)
    hi_b[ia] = np.inf
    options = {"disp": False}
    if time_limit_s is not None:
        options["time_limit"] = float(time_limit_s)
    t0 = time.perf_counter()
    res = milp(c, constraints=LinearConstraint(A.tocsr(), lb, ub), integrality=integrality,
               bounds=Bounds(lo_b, hi_b), options=options)
    wall = time.perf_counter() - t0
    if res.x is None:
        raise ValueError(f"job {job.job_id}: HiGHS found no placement ({res.message})")
    counts = [[0] * S for _ in range(M)]
    for (m, s, v), j in zidx.items():
        if res.x[j] > 0.5:
            counts[m][s] += v
    alpha = asrpt_iteration_time(job, {m: x for m, x in enumerate(counts) if any(x)}, g, b_inter, b_intra,
                                 bwd_coef, allreduce_coef)
    return IlpResult(counts, alpha, float(res.fun), wall, str(res.message))


def make_ilp_mapper(g: int, b_inter: float, b_intra: float, time_limit_s: float | None = None) -> Mapper:
    """A :data:`~raytestbed.core.timing.Mapper` (job, capacities) -> counts that uses the ILP."""

    def mapper(job: Job, capacities: Sequence[int]) -> list[list[int]]:
        return solve_placement_ilp(job, capacities, g, b_inter, b_intra, exact=True,
                                   time_limit_s=time_limit_s).counts

    return mapper


def _compositions(total: int, caps: list[int]):
    """All vectors y with 0 <= y_m <= caps[m] and sum y = total."""
    if not caps:
        if total == 0:
            yield ()
        return
    for y in range(min(total, caps[0]) + 1):
        for rest in _compositions(total - y, caps[1:]):
            yield (y, *rest)


def enumerate_placements(job: Job, capacities: Sequence[int], exact: bool = True):
    """Every count matrix (per server, x_s per stage) that places ``job`` on ``capacities``."""
    caps = [int(c) for c in capacities]
    k = job.replicas()

    def rec(s: int, left: list[int]):
        if s == len(k):
            if not exact or all(x == 0 for x in left):
                yield []
            return
        for col in _compositions(k[s], left):
            for tail in rec(s + 1, [a - b for a, b in zip(left, col)]):
                yield [col, *tail]

    for cols in rec(0, caps):
        yield [[cols[s][m] for s in range(len(k))] for m in range(len(caps))]


def placement_alpha(job: Job, counts: Sequence[Sequence[int]], g: int, b_inter: float, b_intra: float) -> float:
    """Eq. (7) time of a per-server count matrix (servers with no replica are skipped), seconds."""
    return asrpt_iteration_time(job, {m: list(x) for m, x in enumerate(counts) if any(x)}, g, b_inter, b_intra)


def brute_force_placement(job: Job, capacities: Sequence[int], g: int, b_inter: float, b_intra: float,
                          exact: bool = True) -> tuple[float, list[list[int]], int]:
    """(best eq. 7 time, its counts, number of placements enumerated) by exhaustive search."""
    best, arg, n = np.inf, None, 0
    for counts in enumerate_placements(job, capacities, exact):
        n += 1
        a = placement_alpha(job, counts, g, b_inter, b_intra)
        if a < best:
            best, arg = a, counts
    if arg is None:
        raise ValueError(f"job {job.job_id}: no placement on {list(capacities)}")
    return float(best), arg, n


__all__ = ["IlpResult", "solve_placement_ilp", "make_ilp_mapper", "enumerate_placements",
           "brute_force_placement", "placement_alpha"]
