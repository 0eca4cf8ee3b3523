"""Gavel's allocation programs (Narayanan et al., OSDI 2020, §4), solved as linear programs with HiGHS.

An allocation ``X`` (m jobs x n GPU types) gives the fraction of time job j should spend on type k.
Every program shares Gavel's base constraints (§3.1):

    X >= 0,   sum_k X[j, k] <= 1 (a job runs on one type at a time),
    sum_j sf[j] X[j, k] <= N[k]  (a type's GPUs: sf[j] = the job's GPU count, its scale factor),

and the effective throughput of job j is ``throughput(j, X) = sum_k T[j, k] X[j, k]`` (T: iterations/s
of job j alone on type k). The objectives:

* :func:`max_min_fairness` — maximize min_j sf[j] throughput(j, X) / (w[j] throughput(j, X_equal))
  with X_equal the equal time share: X_equal[j, k] = N[k] / sum N (Gavel's proportional allocation).
  With every T = 1 this is the heterogeneity-agnostic LAS of §4.1, else its heterogeneity-aware form.
* :func:`finish_time_fairness` — Themis' rho (§4.2): minimize max_j rho_j, rho_j = (t[j] + r[j] /
  throughput(j, X)) / (c[j] + r[j] / throughput(j, X_iso)), t the time since arrival, r the
  iterations left, c the isolated time so far and X_iso the isolated share of 1/m of the cluster.
  rho is quasi-convex: for a fixed rho every constraint throughput(j, X) >= r[j] / (rho D[j] - t[j])
  is linear, so the smallest feasible rho is found by bisection over LP feasibility.
* :func:`min_total_duration` — makespan (§4.2): minimize M s.t. throughput(j, X) >= r[j] / M, an LP in
  s = 1/M: maximize s s.t. throughput(j, X) >= r[j] s.

Max-min programs have many optimal X (a job off the bottleneck may get any share that keeps it above
the minimum); a second LP then maximizes the sum of the jobs' normalised throughputs with every job
held at the optimum (within 1e-9 relative), so GPUs are not left idle that some job could use.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix, csr_matrix, hstack, identity, kron, vstack

#: relative slack kept on the optimum of the first LP when the second one tie-breaks
TIE_SLACK = 1e-9


def _base(sf: np.ndarray, workers: np.ndarray) -> tuple[csr_matrix, np.ndarray]:
    """A_ub, b_ub of the base constraints over x = X.ravel() (row-major, m x n)."""
    m, n = len(sf), len(workers)
    rows = kron(identity(m), np.ones((1, n)))  # sum_k X[j, k] <= 1
    cols = kron(sf.reshape(1, m), identity(n))  # sum_j sf[j] X[j, k] <= N[k]
    return csr_matrix(vstack([rows, cols])), np.concatenate([np.ones(m), workers.astype(float)])


def _throughput_rows(T: np.ndarray) -> csr_matrix:
    """The m x (m n) matrix whose row j times x is throughput(j, X)."""
    m, n = T.shape
    r = np.repeat(np.arange(m), n)
    c = np.arange(m * n)
    return csr_matrix(coo_matrix((T.ravel(), (r, c)), shape=(m, m * n)))


def _solve(c, A_ub, b_ub) -> np.ndarray | None:
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=(0, None), method="highs")
    return res.x if res.status == 0 else None


def equal_share(sf: np.ndarray, workers: np.ndarray) -> np.ndarray:
    """Gavel's proportional allocation X_equal[j, k] = N[k] / sum N (every row sums to 1)."""
    m = len(sf)
    x = np.tile(workers.astype(float) / max(float(workers.sum()), 1e-300), (m, 1))
    return x


def isolated_share(sf: np.ndarray, workers: np.ndarray) -> np.ndarray:
    """Gavel's isolated allocation: 1/m of every type's GPUs, X_iso[j, k] = N[k] / (m sf[j]), each row
    scaled down to sum at most 1."""
    m = len(sf)
    x = np.outer(1.0 / sf, workers.astype(float) / m)
    return x / np.maximum(x.sum(axis=1), 1.0)[:, None]


def _maximize_min(coef: np.ndarray, sf: np.ndarray, workers: np.ndarray) -> tuple[np.ndarray, float]:
    """max_X min_j sum_k coef[j, k] X[j, k] under the base constraints, tie-broken (module docstring)."""
    m, n = coef.shape
    A, b = _base(sf, workers)
    G = _throughput_rows(coef)
    # variables x (m n), t: maximize t s.t. t - G x <= 0
    A1 = vstack([hstack([A, csr_matrix((A.shape[0], 1))]), hstack([-G, np.ones((m, 1))])])
    b1 = np.concatenate([b, np.zeros(m)])
    c1 = np.zeros(m * n + 1)
    c1[-1] = -1.0
    sol = _solve(c1, csr_matrix(A1), b1)
    if sol is None:
        raise RuntimeError("max-min allocation LP did not solve")
    t = float(sol[-1])
    # tie-break: maximize sum_j G x s.t. G x >= t (1 - slack)
    A2 = vstack([A, -G])
    b2 = np.concatenate([b, -np.full(m, t * (1 - TIE_SLACK))])
    x = _solve(-np.asarray(G.sum(axis=0)).ravel(), csr_matrix(A2), b2)
    x = sol[:-1] if x is None else x
    return np.clip(x.reshape(m, n), 0.0, 1.0), t


def max_min_fairness(T: np.ndarray, sf: np.ndarray, weights: np.ndarray,
                     workers: np.ndarray) -> np.ndarray:
    """Gavel's (heterogeneity-aware) max-min fairness: the allocation X (m x n).

    Args:
        T: iterations/s of job j alone on type k (all ones: heterogeneity-agnostic LAS).
        sf: GPUs per job (scale factors).
        weights: priority weights w (larger = more share).
        workers: GPUs per type, N.
    """
    T, sf, weights, workers = (np.asarray(a, dtype=float) for a in (T, sf, weights, workers))
    prop = (T * equal_share(sf, workers)).sum(axis=1)
    coef = T * (sf / (weights * np.maximum(prop, 1e-300)))[:, None]
    return _maximize_min(coef, sf, workers)[0]


def min_total_duration(T: np.ndarray, sf: np.ndarray, remaining: np.ndarray,
                       workers: np.ndarray) -> tuple[np.ndarray, float]:
    """Gavel's minimum makespan: (X, M) with M the smallest time in which every job can finish its
    ``remaining`` iterations under a fixed allocation, seconds."""
    T, sf, remaining, workers = (np.asarray(a, dtype=float) for a in (T, sf, remaining, workers))
    m, n = T.shape
    coef = T / np.maximum(remaining, 1e-300)[:, None]  # throughput / r >= s
    x, s = _maximize_min(coef, sf, workers)
    return x, (1.0 / s if s > 0 else np.inf)


def finish_time_fairness(T: np.ndarray, sf: np.ndarray, since_arrival: np.ndarray, isolated_time: np.ndarray,
                         remaining: np.ndarray, workers: np.ndarray, rel_tol: float = 1e-7
                         ) -> tuple[np.ndarray, float]:
    """Gavel's finish-time fairness (Themis): (X, rho*) minimizing max_j rho_j (module docstring).

    Args:
        since_arrival: t[j], seconds since job j arrived.
        isolated_time: c[j], seconds of isolated-share time job j's progress so far is worth.
        remaining: r[j], iterations left.
        rel_tol: bisection stops when the bracket on rho is this narrow (relative).
    """
    T, sf, t, c, r, workers = (np.asarray(a, dtype=float) for a in (T, sf, since_arrival, isolated_time,
                                                                     remaining, workers))
    m, n = T.shape
    iso = (T * isolated_share(sf, workers)).sum(axis=1)
    D = c + r / np.maximum(iso, 1e-300)  # expected finish time (from arrival) with the isolated share
    A, b = _base(sf, workers)
    G = _throughput_rows(T)
    AG = csr_matrix(vstack([A, -G]))  # base constraints, then -throughput(j, X) <= -need[j]

    def feasible(rho: float) -> np.ndarray | None:
        slack = rho * D - t
        if np.any(slack <= 0):
            return None
        need = r / slack
        return _solve(np.zeros(m * n), AG, np.concatenate([b, -need]))

    lo = float(np.max(t / D))
    hi = max(1.0, 2 * lo)
    x_hi = feasible(hi)
    while x_hi is None:
        lo, hi = hi, 2 * hi
        if hi > 1e12:
            raise RuntimeError("finish-time fairness: no feasible rho below 1e12 (a job with no throughput?)")
        x_hi = feasible(hi)
    while hi - lo > rel_tol * hi:
        mid = 0.5 * (lo + hi)
        x = feasible(mid)
        if x is None:
            lo = mid
        else:
            hi, x_hi = mid, x
    # tie-break: most total throughput (normalised by the isolated one) at rho*
    need = r / (hi * D - t)
    x = _solve(-np.asarray(_throughput_rows(T / np.maximum(iso, 1e-300)[:, None]).sum(axis=0)).ravel(),
               AG, np.concatenate([b, -need]))
    x = x_hi if x is None else x
    return np.clip(x.reshape(m, n), 0.0, 1.0), hi
