"""GADGET utility functions mu_i and incremental utilities pi_{i,kappa} (GADGET §IV-3, §VI-1).

Every utility is a function of the job's *progress* x = zeta_i * (worker-slots received),
i.e. its (worker-)iterations:

* ``sigmoid`` (the experiments, §VI-1): lambda1 / (1 + exp(-lambda2 (x - lambda3))).
* ``sqrt`` (excessive-training avoidance): C sqrt(x), C = lambda1.
* ``log`` (proportional fairness, zeta_i = 1): lambda1 log(1 + z) with z the worker-slots
  (log(1+.) instead of log).
* ``energy`` (energy efficiency with a positive term): lambda1 (u - e u^2) with
  u = x / F_i and e = ``energy_weight`` (concave; increasing while u < 1/(2e)).

``pi_{i,kappa} = mu_i(x + zeta_i kappa) - mu_i(x)``, a constant per
(job, ring size), which keeps the per-slot ILP (12) linear for any mu.

``envelope=True`` (impl., not in the paper) makes the greedy use the *least concave
majorant* of the sigmoid instead: the tangent line from (0, mu(0)) to the sigmoid,
touching it at x* > lambda3, then the sigmoid. It is concave (the assumption of
Lemma 5 / Thm 6 that the sigmoid breaks) and gives a job far below
lambda3 a positive pi (its utility per iteration) where the raw sigmoid's pi
underflows to 0. Scores are always computed with the true mu.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

UTILITIES = ("sigmoid", "sqrt", "log", "energy")


@dataclass(frozen=True)
class JobUtility:
    """The utility parameters of one job.

    Attributes:
        kind: one of :data:`UTILITIES`.
        zeta: iterations per worker per slot (zeta_i).
        budget: F_i, in worker-iterations (the progress at which the job is done).
        lambda1, lambda2, lambda3: sigmoid parameters (lambda1 is also the scale of the others).
        energy_weight: e of the energy utility.
    """

    kind: str
    zeta: float
    budget: float
    lambda1: float = 1.0
    lambda2: float = 0.01
    lambda3: float = 0.0
    energy_weight: float = 0.5

    def __post_init__(self) -> None:
        if self.kind not in UTILITIES:
            raise ValueError(f"unknown utility {self.kind!r} (known: {', '.join(UTILITIES)})")

    def tangent_point(self) -> float | None:
        """x* where the line from (0, mu(0)) touches the sigmoid (None: no convex part to bridge)."""
        return _tangent(self)

    def _tangent_point(self) -> float | None:
        if self.kind != "sigmoid":
            return None
        mu0 = float(self.mu(0.0))

        def g(x: float) -> float:
            s = expit(self.lambda2 * (x - self.lambda3))
            return self.lambda1 * self.lambda2 * s * (1 - s) * x - (self.lambda1 * s - mu0)

        lo, hi = max(self.lambda3, 1e-9), self.lambda3 + 80.0 / self.lambda2
        if g(lo) <= 0:
            return None
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if g(mid) > 0 else (lo, mid)
        return 0.5 * (lo + hi)

    def mu_envelope(self, progress) -> np.ndarray | float:
        """Least concave majorant of mu (equal to mu for the concave utilities)."""
        xs = self.tangent_point()
        if xs is None:
            return self.mu(progress)
        x = np.asarray(progress, dtype=float)
        mu0, mus = float(self.mu(0.0)), float(self.mu(xs))
        out = np.where(x < xs, mu0 + (mus - mu0) * x / xs, self.mu(x))
        return float(out) if out.ndim == 0 else out

    def mu(self, progress) -> np.ndarray | float:
        """mu_i at progress x (iterations; worker-slots for ``log``), vectorised."""
        x = np.asarray(progress, dtype=float)
        if self.kind == "sigmoid":
            out = self.lambda1 * expit(self.lambda2 * (x - self.lambda3))
        elif self.kind == "sqrt":
            out = self.lambda1 * np.sqrt(np.maximum(x, 0.0))
        elif self.kind == "log":
            out = self.lambda1 * np.log1p(np.maximum(x, 0.0) / self.zeta)
        else:
            u = x / self.budget
            out = self.lambda1 * (u - self.energy_weight * u * u)
        return float(out) if out.ndim == 0 else out

    def log_gain(self, x0, x1) -> np.ndarray:
        """log(mu(x1) - mu(x0)) for x1 >= x0, computed without underflow (-inf where the gain is 0).

        For the sigmoid the gain lambda1 (s(B) - s(A)), A = lambda2 (x0 - lambda3),
        B = lambda2 (x1 - lambda3), s = logistic, is far below float64's range for a
        job far from lambda3 (e.g. lambda2 = 0.5, 1500 iterations short: e^-750), but its
        logarithm is exact: log s(B) + log(1 - s(A)/s(B)) below lambda3 and the mirrored
        form above it. Other utilities: log of the plain difference.
        """
        a = np.asarray(x0, dtype=float)
        b = np.asarray(x1, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.kind != "sigmoid":
                return np.log(np.maximum(np.asarray(self.mu(b)) - np.asarray(self.mu(a)), 0.0))
            A = self.lambda2 * (a - self.lambda3)
            B = self.lambda2 * (b - self.lambda3)

            def logsig(v):
                return -np.logaddexp(0.0, -v)

            lower = logsig(B) + np.log1p(-np.exp(logsig(A) - logsig(B)))
            upper = logsig(-A) + np.log1p(-np.exp(logsig(-B) - logsig(-A)))
            out = np.where(A >= 0, upper, lower) + np.log(self.lambda1)
            return np.where(B > A, out, -np.inf)

    def slot_ring_sizes(self, worker_slots: float, n_max: int) -> int:
        """q_i: the largest ring a job with ``worker_slots`` of progress (z) can use in a slot, at most
        ``n_max`` and at most the worker-slots left of its budget (at least 1)."""
        return min(n_max, max(1, math.floor(self.budget / self.zeta - worker_slots + 1e-9)))

    def slot_gains(self, worker_slots: float, q: int, envelope: bool = False) -> np.ndarray:
        """pi_kappa for kappa = 1..q (GADGET §V-C): the utility gained by running kappa workers for one
        slot from z = ``worker_slots`` of progress, mu(min(x + zeta kappa, F)) - mu(x) with x = zeta z
        (never below 0); ``envelope``: on mu's concave envelope (:meth:`mu_envelope`)."""
        x = self.zeta * worker_slots
        k = np.arange(1, q + 1)
        mu = self.mu_envelope if envelope else self.mu
        return np.maximum(np.atleast_1d(mu(np.minimum(x + self.zeta * k, self.budget))) - mu(x), 0.0)


@functools.lru_cache(maxsize=65536)
def _tangent(u: JobUtility) -> float | None:
    return u._tangent_point()


def job_utility(job, kind: str = "sigmoid", energy_weight: float = 0.5) -> JobUtility:
    """The utility of a job built by the ``gadget`` workload (parameters in ``job.extra``)."""
    e = job.extra
    return JobUtility(kind, float(e["zeta"]), float(e["F"]), float(e.get("lambda1", 1.0)),
                      float(e.get("lambda2", 0.01)), float(e.get("lambda3", 0.0)), energy_weight)


def total_utility(jobs, progress: dict[int, float], kind: str = "sigmoid") -> float:
    """sum_i mu_i(progress_i) (the DDLJS objective) over ``jobs`` (progress in iterations)."""
    tot = 0.0
    for j in jobs:
        u = job_utility(j, kind)
        tot += u.mu(min(progress.get(j.job_id, 0.0), u.budget))
    return float(tot)


__all__ = ["JobUtility", "UTILITIES", "job_utility", "total_utility"]
