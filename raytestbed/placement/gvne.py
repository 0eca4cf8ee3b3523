"""Per-slot generalised virtual network embedding (G-VNE) of ring jobs (GADGET §V-C).

Problem (12)–(19): each active job ``i`` may get a ring of size kappa in Q_i =
{1..q_i} with incremental utility ``pi[i][kappa-1]``; rings are
embedded onto servers (GPU and memory capacities, eqs. 16/18) and links (each
inter-server hop reserves ``b_i`` bytes/s on its path, eqs. 17/19). Maximise
sum of pi over embedded jobs.

Solvers behind one interface, :func:`solve_slot`:

* ``exact_literal``: the ILP (12)–(19) exactly as printed (virtual nodes
  varrho^u_{i,kappa,a}, unit flows theta^{u,v}_{i,kappa,a,b} on the directed
  server/ToR/core graph), HiGHS branch and bound. Small instances only.
* ``exact``: an equivalent compact ILP for the two-tier tree (unique paths): per
  job, workers per server y_iu, server-used x_iu, multi-server m_i and multi-rack
  flags; a used server of a multi-server ring reserves b_i on its NIC both ways,
  a used rack of a multi-rack ring reserves b_i on its up/downlink — exactly the
  fewest reservations a ring over those servers can make (see
  :mod:`raytestbed.placement.ring_embedding`). Same optimum as ``exact_literal``
  (checked in the tests), far fewer variables.
* ``lp_rs_mde`` (default, Algorithm 2): (L3) LP relaxation of (12) and ring-size
  selection kappa_i = argmax pi chi-bar (Lemma 7); (L4) an augmented LP with the
  sizes fixed that splits each job into single-server and multi-server mass and
  binds the multi-server workers to NIC reservations (the ring's degree-2 hops);
  (L5–6) per job a set of mapping/probability pairs (phi^k, omega^k) from the
  augmented LP; (L7–9) up to ``u_b`` randomised roundings (each job takes
  omega^k with probability phi^k, none with 1 - sum phi). A rounding that
  violates a capacity is repaired (embedded jobs admitted by decreasing pi, one
  that does not fit is dropped); the best feasible rounding is returned, so no
  allocation ever exceeds a capacity. If rounding embeds
  nothing while the LP says something fits, the greedy embedding is used and the
  fallback is logged. ``fill=True`` then packs still-unembedded jobs greedily
  into leftover capacity (work conservation; an impl. choice, reported
  separately in the reproduction).
* ``greedy``: jobs by pi/kappa descending, largest ring that fits by
  :func:`~raytestbed.placement.ring_embedding.greedy_ring`.

Units: bandwidth bytes/s, memory GB, one GPU per worker.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from raytestbed.placement.ring_embedding import (
    RingEmbedding,
    Substrate,
    capacity_violations,
    greedy_ring,
    make_embedding,
)

log = logging.getLogger(__name__)
_EPS = 1e-9


@dataclass(frozen=True)
class SlotJob:
    """One active job of a slot, as G-VNE sees it.

    Attributes:
        job_id: the job.
        pi: incremental utility of a ring of size kappa at ``pi[kappa-1]`` (kappa = 1..q_i).
        b_bps: reserved bandwidth per ring hop, bytes/s.
        mem_gb: host memory per worker, GB.
    """

    job_id: int
    pi: tuple[float, ...]
    b_bps: float
    mem_gb: float = 0.0
    log_pi: tuple[float, ...] = ()  #: log pi_{i,kappa} computed without underflow (optional; see fill_by_log_pi)

    @property
    def q(self) -> int:
        return len(self.pi)


@dataclass
class SlotSolution:
    """Embeddings chosen for one slot and how they were found."""

    embeddings: dict[int, RingEmbedding]
    utility: float
    mode: str
    lp_bound: float = float("nan")  #: LP relaxation value (an upper bound on the optimum)
    rounding_utility: float = float("nan")  #: utility of the best rounding, before fill
    clean_roundings: int = 0  #: roundings that violated no capacity
    tries: int = 0
    fallback: str = ""  #: "" | "repair" | "greedy"
    optimal: bool = False  #: exact solvers: proven optimal
    wall_s: float = 0.0
    info: dict = field(default_factory=dict)


def utility_of(embeddings: dict[int, RingEmbedding], jobs: list[SlotJob]) -> float:
    by_id = {j.job_id: j for j in jobs}
    return float(sum(by_id[i].pi[e.workers - 1] for i, e in embeddings.items()))


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


class _Cols:
    """Column allocator for building sparse LPs."""

    def __init__(self) -> None:
        self.n = 0
        self.lb: list[float] = []
        self.ub: list[float] = []
        self.c: list[float] = []
        self.integ: list[int] = []

    def add(self, k: int, lb=0.0, ub=1.0, c=0.0, integ=0) -> np.ndarray:
        idx = np.arange(self.n, self.n + k)
        self.n += k
        for lst, val in ((self.lb, lb), (self.ub, ub), (self.c, c)):
            if np.ndim(val) == 0:
                lst.extend([float(val)] * k)
            else:
                lst.extend(np.asarray(val, dtype=float).tolist())
        self.integ.extend([integ] * k)
        return idx


class _Rows:
    """Row builder: rows of (cols, coefs) with bounds lo <= a x <= hi."""

    def __init__(self) -> None:
        self.r: list[np.ndarray] = []
        self.cidx: list[np.ndarray] = []
        self.v: list[np.ndarray] = []
        self.lo: list[float] = []
        self.hi: list[float] = []

    def add(self, cols, coefs, lo=-np.inf, hi=np.inf) -> None:
        cols = np.asarray(cols, dtype=np.int64).ravel()
        coefs = np.asarray(coefs, dtype=float).ravel()
        if coefs.size != cols.size:
            coefs = np.full(cols.size, float(coefs.ravel()[0]) if coefs.size else 0.0)
        k = len(self.lo)
        self.r.append(np.full(cols.size, k, dtype=np.int64))
        self.cidx.append(cols)
        self.v.append(coefs)
        self.lo.append(lo)
        self.hi.append(hi)

    def add_block(self, cols: np.ndarray, coefs: np.ndarray, lo: float, hi: float) -> None:
        """Many rows at once: row k has columns ``cols[k]`` with coefficients ``coefs[k]``."""
        cols = np.asarray(cols, dtype=np.int64)
        coefs = np.broadcast_to(np.asarray(coefs, dtype=float), cols.shape)
        n, w = cols.shape
        k0 = len(self.lo)
        self.r.append(np.repeat(np.arange(k0, k0 + n), w))
        self.cidx.append(cols.ravel())
        self.v.append(np.ascontiguousarray(coefs).ravel())
        self.lo.extend([lo] * n)
        self.hi.extend([hi] * n)

    def matrix(self, n: int) -> sp.csr_matrix:
        if not self.lo:
            return sp.csr_matrix((0, n))
        return sp.csr_matrix((np.concatenate(self.v), (np.concatenate(self.r), np.concatenate(self.cidx))),
                             shape=(len(self.lo), n))


def _server_caps(sub: Substrate, mem_gb: float) -> np.ndarray:
    cap = sub.gpu.astype(float)
    if mem_gb > 0:
        cap = np.minimum(cap, np.floor(sub.mem / mem_gb + 1e-9))
    return np.maximum(cap, 0)


def _nic(sub: Substrate, m: int) -> float:
    return min(sub.links[("egress", m)], sub.links[("ingress", m)])


def _solve_milp(cols: _Cols, rows: _Rows, time_limit: float | None, lp: bool = False):
    c = -np.asarray(cols.c)  # maximise
    A = rows.matrix(cols.n)
    cons = [LinearConstraint(A, np.asarray(rows.lo), np.asarray(rows.hi))] if rows.lo else []
    integ = np.zeros(cols.n) if lp else np.asarray(cols.integ)
    opts = {"disp": False}
    if time_limit is not None:
        opts["time_limit"] = float(time_limit)
    return milp(c, constraints=cons, integrality=integ, bounds=Bounds(cols.lb, cols.ub), options=opts)


# ---------------------------------------------------------------------------
# exact: literal ILP (12)-(19)
# ---------------------------------------------------------------------------


def _substrate_graph(sub: Substrate):
    """Directed substrate graph: nodes = servers, ToRs, core; links with residual capacities."""
    c = sub.cluster
    M = c.num_servers
    links: list[tuple[int, int, float]] = []
    if c.racks:
        tor = {r.rack_id: M + k for k, r in enumerate(c.racks)}
        core = M + len(c.racks)
        n_nodes = core + 1
        for s in c.servers:
            t = tor[s.rack] if s.rack is not None else core
            links.append((s.server_id, t, sub.links[("egress", s.server_id)]))
            links.append((t, s.server_id, sub.links[("ingress", s.server_id)]))
        for r in c.racks:
            links.append((tor[r.rack_id], core, sub.links[("rack_up", r.rack_id)]))
            links.append((core, tor[r.rack_id], sub.links[("rack_down", r.rack_id)]))
    else:
        n_nodes = M + 1
        for s in c.servers:
            links.append((s.server_id, M, sub.links[("egress", s.server_id)]))
            links.append((M, s.server_id, sub.links[("ingress", s.server_id)]))
    return n_nodes, links


def _add_gpu_mem_rows(rows: _Rows, sub: Substrate, gpu_terms: list, mem_terms: list) -> None:
    """GPU (16) and memory (18) capacity rows per server from (column, coefficient) terms."""
    for u in range(sub.cluster.num_servers):
        if gpu_terms[u]:
            cc, cf = zip(*gpu_terms[u])
            rows.add(cc, cf, -np.inf, float(sub.gpu[u]))
            if np.isfinite(sub.mem[u]):
                cc, cf = zip(*mem_terms[u])
                rows.add(cc, cf, -np.inf, float(sub.mem[u]))


def _literal_model(jobs: list[SlotJob], sub: Substrate) -> tuple[_Cols, _Rows, dict, dict]:
    """GADGET's slot ILP (12)–(19) as printed: columns (all integral), rows, and the chi / varrho
    column ids by (job index, ring size kappa). ``_solve_milp(..., lp=True)`` solves its LP relaxation."""
    M = sub.cluster.num_servers
    n_nodes, links = _substrate_graph(sub)
    L = len(links)
    out_of = [[k for k, (u, _, _) in enumerate(links) if u == n] for n in range(n_nodes)]
    into = [[k for k, (_, v, _) in enumerate(links) if v == n] for n in range(n_nodes)]
    cols, rows = _Cols(), _Rows()
    gpu_terms = [[] for _ in range(M)]  # (col, coef)
    mem_terms = [[] for _ in range(M)]
    link_terms = [[] for _ in range(L)]
    varrho: dict = {}
    chi: dict = {}
    for i, j in enumerate(jobs):
        rho = cols.add(1, integ=1)[0]
        chis = []
        for kappa in range(1, j.q + 1):
            x = cols.add(1, c=j.pi[kappa - 1], integ=1)[0]
            chi[i, kappa] = x
            chis.append(x)
            vr = cols.add(kappa * M, integ=1).reshape(kappa, M)
            varrho[i, kappa] = vr
            for a in range(kappa):  # (14)
                rows.add(np.r_[vr[a], x], np.r_[np.ones(M), -1.0], 0.0, 0.0)
                for u in range(M):
                    gpu_terms[u].append((vr[a, u], 1.0))
                    mem_terms[u].append((vr[a, u], j.mem_gb))
            edges = [] if kappa == 1 else [(a, (a + 1) % kappa) for a in range(kappa)]
            for (a, b) in edges:
                th = cols.add(L, integ=1)
                for n in range(n_nodes):  # (15): out - in = varrho_a^n - varrho_b^n
                    cc = list(th[out_of[n]]) + list(th[into[n]])
                    cf = [1.0] * len(out_of[n]) + [-1.0] * len(into[n])
                    if n < M:
                        cc += [vr[a, n], vr[b, n]]
                        cf += [-1.0, 1.0]
                    rows.add(cc, cf, 0.0, 0.0)
                for k in range(L):
                    link_terms[k].append((th[k], j.b_bps))
        rows.add(np.r_[chis, rho], np.r_[np.ones(len(chis)), -1.0], 0.0, 0.0)  # (13)
    _add_gpu_mem_rows(rows, sub, gpu_terms, mem_terms)  # (16)+(18)
    for k in range(L):  # (17)+(19)
        if link_terms[k]:
            cc, cf = zip(*link_terms[k])
            rows.add(cc, cf, -np.inf, float(links[k][2]))
    return cols, rows, chi, varrho


def solve_exact_literal(jobs: list[SlotJob], sub: Substrate, time_limit: float | None = 60.0) -> SlotSolution:
    """ILP (12)–(19) as printed, solved by HiGHS; small instances only."""
    t0 = time.perf_counter()
    cols, rows, chi, varrho = _literal_model(jobs, sub)
    res = _solve_milp(cols, rows, time_limit)
    embs: dict[int, RingEmbedding] = {}
    if res.x is not None:
        x = res.x
        for i, j in enumerate(jobs):
            for kappa in range(1, j.q + 1):
                if x[chi[i, kappa]] > 0.5:
                    counts = np.rint(x[varrho[i, kappa]]).sum(axis=0)
                    embs[j.job_id] = make_embedding(j.job_id, {u: int(c) for u, c in enumerate(counts) if c > 0},
                                                    sub.cluster, j.b_bps, j.mem_gb)
    return SlotSolution(embs, utility_of(embs, jobs), "exact_literal", optimal=res.status == 0,
                        wall_s=time.perf_counter() - t0, info={"status": int(res.status), "vars": cols.n})


def solve_lp_literal(jobs: list[SlotJob], sub: Substrate) -> float:
    """Optimal value of the LP relaxation of the literal (12)–(19) (for checking the compact forms)."""
    cols, rows, _, _ = _literal_model(jobs, sub)
    res = _solve_milp(cols, rows, None, lp=True)
    return float(-res.fun) if res.status == 0 else float("nan")


# ---------------------------------------------------------------------------
# exact: compact tree ILP
# ---------------------------------------------------------------------------


def solve_exact(jobs: list[SlotJob], sub: Substrate, time_limit: float | None = 60.0) -> SlotSolution:
    """Compact ILP equivalent to (12)–(19) on a two-tier tree; HiGHS branch and bound."""
    t0 = time.perf_counter()
    c = sub.cluster
    M = c.num_servers
    racks = [r.rack_id for r in c.racks]
    rack_of = [s.rack for s in c.servers]
    cols, rows = _Cols(), _Rows()
    gpu_terms = [[] for _ in range(M)]
    mem_terms = [[] for _ in range(M)]
    nic_terms = [[] for _ in range(M)]
    up_terms = {r: [] for r in racks}
    keep = []
    for j in jobs:
        cap = _server_caps(sub, j.mem_gb)
        srv = [u for u in range(M) if cap[u] >= 1]
        if not srv:
            keep.append(None)
            continue
        n = len(srv)
        kap = np.arange(1, j.q + 1)
        chi = cols.add(j.q, c=np.asarray(j.pi), integ=1)
        y = cols.add(n, ub=np.minimum(cap[srv], j.q), integ=1)
        x = cols.add(n, integ=1)
        m = cols.add(1, integ=1)[0]
        nn = cols.add(n)  # NIC reserved (continuous, forced 0/1 by the row below)
        rows.add(chi, 1.0, -np.inf, 1.0)  # (13)
        rows.add(np.r_[y, chi], np.r_[np.ones(n), -kap], 0.0, 0.0)  # workers = kappa
        for k in range(n):
            rows.add([y[k], x[k]], [1.0, -min(cap[srv[k]], j.q)], -np.inf, 0.0)
            rows.add([x[k], m, nn[k]], [1.0, 1.0, -1.0], -np.inf, 1.0)  # nn >= x + m - 1
            gpu_terms[srv[k]].append((y[k], 1.0))
            mem_terms[srv[k]].append((y[k], j.mem_gb))
            nic_terms[srv[k]].append((nn[k], j.b_bps))
        rows.add(np.r_[x, m], np.r_[np.ones(n), -(n - 1)], -np.inf, 1.0)  # >1 server => m
        rows.add(np.r_[x, chi], np.r_[np.ones(n), -float(n) * np.ones(j.q)], -np.inf, 0.0)
        if racks:
            rk = sorted({rack_of[u] for u in srv})
            rho = cols.add(len(rk), integ=1)
            mr = cols.add(1, integ=1)[0]
            nr = cols.add(len(rk))
            pos = {r: k for k, r in enumerate(rk)}
            for k, u in enumerate(srv):
                rows.add([x[k], rho[pos[rack_of[u]]]], [1.0, -1.0], -np.inf, 0.0)
            rows.add(np.r_[rho, mr], np.r_[np.ones(len(rk)), -(len(rk) - 1)], -np.inf, 1.0)
            for k, r in enumerate(rk):
                rows.add([rho[k], mr, nr[k]], [1.0, 1.0, -1.0], -np.inf, 1.0)
                up_terms[r].append((nr[k], j.b_bps))
        keep.append((chi, y, srv))
    for u in range(M):
        if gpu_terms[u]:
            cc, cf = zip(*gpu_terms[u])
            rows.add(cc, cf, -np.inf, float(sub.gpu[u]))
            if np.isfinite(sub.mem[u]):
                cc, cf = zip(*mem_terms[u])
                rows.add(cc, cf, -np.inf, float(sub.mem[u]))
            cc, cf = zip(*nic_terms[u])
            rows.add(cc, cf, -np.inf, _nic(sub, u))
    for r in racks:
        if up_terms[r]:
            cc, cf = zip(*up_terms[r])
            rows.add(cc, cf, -np.inf, min(sub.links[("rack_up", r)], sub.links[("rack_down", r)]))
    embs: dict[int, RingEmbedding] = {}
    if cols.n == 0:
        return SlotSolution({}, 0.0, "exact", optimal=True, wall_s=time.perf_counter() - t0)
    res = _solve_milp(cols, rows, time_limit)
    if res.x is not None:
        xv = res.x
        for j, k in zip(jobs, keep):
            if k is None:
                continue
            chi, y, srv = k
            if xv[chi].max() > 0.5:
                counts = {srv[q]: int(round(xv[y[q]])) for q in range(len(srv)) if xv[y[q]] > 0.5}
                embs[j.job_id] = make_embedding(j.job_id, counts, c, j.b_bps, j.mem_gb)
    return SlotSolution(embs, utility_of(embs, jobs), "exact", optimal=res.status == 0,
                        wall_s=time.perf_counter() - t0,
                        info={"status": int(res.status), "vars": cols.n, "mip_gap": getattr(res, "mip_gap", None)})


# ---------------------------------------------------------------------------
# LP-RS-MDE (Algorithm 2)
# ---------------------------------------------------------------------------


def lp_relaxation(jobs: list[SlotJob], sub: Substrate) -> tuple[float, list[np.ndarray]]:
    """LP relaxation of (12)–(19) (Algorithm 2, line 3) in an equivalent reduced form.

    In the relaxation every virtual node of a job may take the same fractional
    distribution over servers, so every unit flow (15) is zero and links never bind;
    what remains is chi_{i,kappa} and the workers per server w_iu = sum_{kappa,a}
    varrho^u_{i,kappa,a} under (13), (16), (18). Its value equals that of the literal
    relaxation (:func:`solve_lp_literal`; checked in the tests). Returns
    (value, chi-bar per job).
    """
    M = sub.cluster.num_servers
    cols, rows = _Cols(), _Rows()
    gpu_terms = [[] for _ in range(M)]
    mem_terms = [[] for _ in range(M)]
    chis = []
    for j in jobs:
        srv = np.nonzero(_server_caps(sub, j.mem_gb) >= 1)[0]
        chi = cols.add(j.q, c=np.asarray(j.pi))
        chis.append(chi)
        if srv.size == 0:
            rows.add(chi, 1.0, -np.inf, 0.0)
            continue
        w = cols.add(srv.size, ub=np.inf)
        rows.add(chi, 1.0, -np.inf, 1.0)
        rows.add(np.r_[w, chi], np.r_[np.ones(srv.size), -np.arange(1, j.q + 1)], 0.0, 0.0)
        for k, u in enumerate(srv):
            gpu_terms[u].append((w[k], 1.0))
            mem_terms[u].append((w[k], j.mem_gb))
    _add_gpu_mem_rows(rows, sub, gpu_terms, mem_terms)  # (16)+(18)
    if cols.n == 0:
        return 0.0, []
    res = _lp(cols, rows)
    return float(-res.fun), [res.x[c] for c in chis]


def _lp(cols: _Cols, rows: _Rows):
    """Solve max c x s.t. lo <= A x <= hi, bounds, with HiGHS (linprog)."""
    A = rows.matrix(cols.n)
    lo, hi = np.asarray(rows.lo, dtype=float), np.asarray(rows.hi, dtype=float)
    eq = lo == hi
    up = ~eq & np.isfinite(hi)
    dn = ~eq & np.isfinite(lo)
    A_ub = sp.vstack([A[up], -A[dn]]).tocsr() if (up.any() or dn.any()) else None
    b_ub = np.r_[hi[up], -lo[dn]] if A_ub is not None else None
    res = linprog(-np.asarray(cols.c), A_ub=A_ub, b_ub=b_ub,
                  A_eq=A[eq] if eq.any() else None, b_eq=hi[eq] if eq.any() else None,
                  bounds=np.c_[cols.lb, cols.ub], method="highs")
    if res.status != 0:
        raise RuntimeError(f"G-VNE LP failed: {res.message}")
    return res


def select_ring_sizes(jobs: list[SlotJob], chi_bar: list[np.ndarray]) -> dict[int, int]:
    """Lemma 7: kappa_i = argmax_{kappa: chi-bar > 0} pi chi-bar (ties: larger kappa), for rho-bar > 0."""
    out = {}
    for j, ch in zip(jobs, chi_bar):
        if ch.sum() <= 1e-7:
            continue
        score = np.where(ch > 1e-7, np.asarray(j.pi) * ch, -np.inf)
        best = score.max()
        if not np.isfinite(best):
            continue
        kap = int(np.nonzero(score >= best - 1e-12 * max(1.0, abs(best)))[0].max()) + 1
        out[j.job_id] = kap
    return out


def augmented_lp(jobs: list[SlotJob], kappa: dict[int, int], sub: Substrate):
    """Algorithm 2 line 4 (impl.): the relaxation with ring sizes fixed, links bound to the ring.

    Per job with ring size kappa: single-server mass s_iu (kappa workers on server
    u, no link) and multi-server mass m_i with workers w_iu <= min(kappa-1, cap_u)
    e_iu, where e_iu <= m_i is the fraction of rings using server u, each such
    ring reserving b_i on u's NIC both ways (degree 2). Maximise
    sum pi_{i,kappa} (sum_u s_iu + m_i).
    Returns (value, {job: (servers, s, m, w, e)}).
    """
    M = sub.cluster.num_servers
    cols, rows = _Cols(), _Rows()
    gpu_terms = [[] for _ in range(M)]
    mem_terms = [[] for _ in range(M)]
    nic_terms = [[] for _ in range(M)]
    parts = {}
    for j in jobs:
        k = kappa.get(j.job_id)
        if not k:
            continue
        cap = _server_caps(sub, j.mem_gb)
        pi = j.pi[k - 1]
        single = np.nonzero(cap >= k)[0]
        s = cols.add(single.size, c=pi)
        for q, u in enumerate(single):
            gpu_terms[u].append((s[q], float(k)))
            mem_terms[u].append((s[q], k * j.mem_gb))
        multi = np.array([u for u in range(M) if cap[u] >= 1 and _nic(sub, u) >= j.b_bps - _EPS], dtype=int)
        if k >= 2 and multi.size >= 2:
            m = cols.add(1, c=pi)
            w = cols.add(multi.size, ub=np.inf)
            e = cols.add(multi.size)
            rows.add(np.r_[w, m], np.r_[np.ones(multi.size), -k], 0.0, 0.0)
            rows.add_block(np.c_[w, e], np.c_[np.ones(multi.size), -np.minimum(k - 1, cap[multi])], -np.inf, 0.0)
            rows.add_block(np.c_[e, np.full(multi.size, m[0])], np.array([1.0, -1.0]), -np.inf, 0.0)
            for q, u in enumerate(multi):
                gpu_terms[u].append((w[q], 1.0))
                mem_terms[u].append((w[q], j.mem_gb))
                nic_terms[u].append((e[q], j.b_bps))
            rows.add(np.r_[e, m], np.r_[np.ones(multi.size), -2.0 * np.ones(1)], 0.0, np.inf)
            rows.add(np.r_[s, m], 1.0, -np.inf, 1.0)
            parts[j.job_id] = (single, s, multi, m[0], w, e)
        else:
            rows.add(s, 1.0, -np.inf, 1.0)
            parts[j.job_id] = (single, s, np.array([], dtype=int), None, None, None)
    for u in range(M):
        if gpu_terms[u]:
            cc, cf = zip(*gpu_terms[u])
            rows.add(cc, cf, -np.inf, float(sub.gpu[u]))
            if np.isfinite(sub.mem[u]):
                cc, cf = zip(*mem_terms[u])
                rows.add(cc, cf, -np.inf, float(sub.mem[u]))
        if nic_terms[u]:
            cc, cf = zip(*nic_terms[u])
            rows.add(cc, cf, -np.inf, _nic(sub, u))
    if cols.n == 0:
        return 0.0, {}
    res = _lp(cols, rows)
    x = res.x
    out = {}
    for jid, (single, s, multi, m, w, e) in parts.items():
        out[jid] = (single, x[s], multi, (x[m] if m is not None else 0.0),
                    (x[w] if w is not None else None))
    return float(-res.fun), out


def decompose(job: SlotJob, k: int, part, sub: Substrate, rng: np.random.Generator,
              samples: int = 20) -> list[tuple[float, dict[int, int]]]:
    """Algorithm 2 lines 5–6 (impl.): mapping/probability pairs (phi^k, omega^k) of one job.

    Single-server mass gives mapping "kappa workers on u" with probability s_iu; the
    multi-server mass m_i is split over ``samples`` rings drawn from the fractional
    worker distribution w_iu (servers drawn without replacement with probability
    proportional to w_iu, each given up to round(w_iu / m_i) workers). Identical
    mappings are merged; probabilities sum to at most 1.
    """
    single, s, multi, m, w = part
    maps: dict[tuple, float] = {}
    for u, p in zip(single, s):
        if p > 1e-9:
            key = ((int(u), k),)
            maps[key] = maps.get(key, 0.0) + float(p)
    if m is not None and m > 1e-9 and w is not None:
        cap = _server_caps(sub, job.mem_gb)
        expect = np.maximum(w / m, 0.0)
        for _ in range(samples):
            left, counts = k, {}
            avail = expect.copy()
            while left > 0 and avail.sum() > 1e-12:
                q = int(rng.choice(len(avail), p=avail / avail.sum()))
                u = int(multi[q])
                give = int(min(left, cap[u], max(1, round(expect[q]))))
                counts[u] = give
                left -= give
                avail[q] = 0.0
            if left > 0:
                continue
            key = tuple(sorted(counts.items()))
            maps[key] = maps.get(key, 0.0) + float(m) / samples
    total = sum(maps.values())
    scale = 1.0 / total if total > 1.0 else 1.0
    return [(p * scale, dict(key)) for key, p in maps.items()]


def _admit(order: list[RingEmbedding], sub: Substrate) -> dict[int, RingEmbedding]:
    """Keep embeddings in the given order while they fit (repair of a violating rounding)."""
    res = sub.copy()
    kept = {}
    for e in order:
        if res.fits(e):
            res.take(e)
            kept[e.job_id] = e
    return kept


def solve_lp_rs_mde(jobs: list[SlotJob], sub: Substrate, rng: np.random.Generator, u_b: int = 50,
                    samples: int = 20, fill: bool = True) -> SlotSolution:
    """LP-RS-MDE (Algorithm 2) with the never-violate repair; see the module docstring."""
    t0 = time.perf_counter()
    jobs = [j for j in jobs if j.q >= 1]
    by_id = {j.job_id: j for j in jobs}
    lp_val, chi_bar = lp_relaxation(jobs, sub) if jobs else (0.0, [])
    kappa = select_ring_sizes(jobs, chi_bar)
    aug_val, parts = augmented_lp(jobs, kappa, sub) if kappa else (0.0, {})
    mappings: dict[int, list[tuple[float, RingEmbedding]]] = {}
    for jid, part in parts.items():
        j = by_id[jid]
        pairs = decompose(j, kappa[jid], part, sub, rng, samples)
        mappings[jid] = [(p, make_embedding(jid, cnt, sub.cluster, j.b_bps, j.mem_gb)) for p, cnt in pairs]
    best: dict[int, RingEmbedding] = {}
    best_u, clean, best_clean = -1.0, 0, False
    tries = 0
    for _ in range(u_b if mappings else 0):
        tries += 1
        chosen = []
        for jid, pairs in mappings.items():
            r = rng.random()
            acc = 0.0
            for p, emb in pairs:
                acc += p
                if r < acc:
                    chosen.append(emb)
                    break
        ok = not capacity_violations(chosen, sub)
        if ok:
            clean += 1
            got = {e.job_id: e for e in chosen}
        else:
            chosen.sort(key=lambda e: -by_id[e.job_id].pi[e.workers - 1])
            got = _admit(chosen, sub)
        u = utility_of(got, jobs)
        if u > best_u + 1e-12 or (ok and not best_clean and u >= best_u - 1e-12):
            best, best_u, best_clean = got, u, ok
    fallback = "" if best_clean or not mappings else "repair"
    if not best and lp_val > 1e-12:
        g = solve_greedy(jobs, sub)
        if g.embeddings:
            best, fallback = g.embeddings, "greedy"
            log.info("LP-RS-MDE: rounding embedded nothing; greedy fallback embeds %d jobs", len(best))
    elif fallback == "repair":
        log.debug("LP-RS-MDE: no violation-free rounding in %d tries; repaired", tries)
    rounding_u = utility_of(best, jobs)
    if fill:
        best = _fill(best, jobs, sub)
    return SlotSolution(best, utility_of(best, jobs), "lp_rs_mde", lp_bound=lp_val, rounding_utility=rounding_u,
                        clean_roundings=clean, tries=tries, fallback=fallback, wall_s=time.perf_counter() - t0,
                        info={"augmented_lp": aug_val, "ring_sizes": len(kappa)})


def _fill(embs: dict[int, RingEmbedding], jobs: list[SlotJob], sub: Substrate) -> dict[int, RingEmbedding]:
    """Greedily add unembedded jobs into leftover capacity (pi/kappa order, largest ring that fits)."""
    res = sub.copy()
    for e in embs.values():
        res.take(e)
    out = dict(embs)
    rest = [j for j in jobs if j.job_id not in out and max(j.pi) > 0]
    rest.sort(key=lambda j: -max(p / (k + 1) for k, p in enumerate(j.pi)))
    for j in rest:
        if not (res.gpu > 0).any():
            break
        e = _best_greedy(j, res)
        if e is not None:
            res.take(e)
            out[j.job_id] = e
    return out


def _best_greedy(j: SlotJob, res: Substrate) -> RingEmbedding | None:
    """The greedy ring of the size with the largest pi that fits."""
    for k in sorted(range(1, j.q + 1), key=lambda k: (-j.pi[k - 1], -k)):
        if j.pi[k - 1] <= 0:
            break
        e = greedy_ring(j.job_id, k, j.b_bps, res, j.mem_gb)
        if e is not None:
            return e
    return None


def fill_by_log_pi(embs: dict[int, RingEmbedding], jobs: list[SlotJob], sub: Substrate) -> dict[int, RingEmbedding]:
    """Give leftover capacity to jobs whose pi is below float resolution, largest exact pi first.

    The per-slot objective (10) is strictly increasing in every unsaturated job's
    workers (a sigmoid is strictly increasing), so its exact optimum never leaves a
    GPU idle that some active job could use, however small that job's pi. In float64
    (and within an LP solver's tolerances) such pi are 0. This stage compares them by
    ``log_pi`` (exact, :meth:`~raytestbed.placement.utility.JobUtility.log_gain`): jobs
    by their largest log pi descending, each given the largest ring (largest pi) that
    fits in the residual substrate — the greedy limit of re-solving (10) on ever smaller
    utility scales. ``embs`` is kept; returns the extended dict.
    """
    res = sub.copy()
    for e in embs.values():
        res.take(e)
    out = dict(embs)
    rest = [j for j in jobs if j.job_id not in out and j.log_pi and np.isfinite(max(j.log_pi))]
    rest.sort(key=lambda j: (-max(j.log_pi), j.job_id))
    for j in rest:
        if not (res.gpu > 0).any():
            break
        for k in sorted(range(1, j.q + 1), key=lambda k: (-j.log_pi[k - 1], -k)):
            if not np.isfinite(j.log_pi[k - 1]):
                break
            e = greedy_ring(j.job_id, k, j.b_bps, res, j.mem_gb)
            if e is not None:
                res.take(e)
                out[j.job_id] = e
                break
    return out


def solve_greedy(jobs: list[SlotJob], sub: Substrate) -> SlotSolution:
    """Greedy fallback (mode 3)."""
    t0 = time.perf_counter()
    embs = _fill({}, jobs, sub)
    return SlotSolution(embs, utility_of(embs, jobs), "greedy", wall_s=time.perf_counter() - t0)


def solve_slot(jobs: list[SlotJob], sub: Substrate, mode: str = "lp_rs_mde", rng: np.random.Generator | None = None,
               **kw) -> SlotSolution:
    """``solve_slot(active_jobs, substrate) -> embeddings`` in one of the modes above."""
    if mode == "lp_rs_mde":
        return solve_lp_rs_mde(jobs, sub, rng if rng is not None else np.random.default_rng(0), **kw)
    if mode == "exact":
        return solve_exact(jobs, sub, **kw)
    if mode == "exact_literal":
        return solve_exact_literal(jobs, sub, **kw)
    if mode == "greedy":
        return solve_greedy(jobs, sub)
    raise ValueError(f"unknown G-VNE mode {mode!r} (known: lp_rs_mde, exact, exact_literal, greedy)")
