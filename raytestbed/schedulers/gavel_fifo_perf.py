"""Gavel's ``fifo_perf``: FIFO that gives every job its fastest GPU type with room.

At every new allocation (a job arrived or finished) the assignment starts afresh: jobs in arrival order
each take the type with room on which they run fastest, until the head of the queue fits nowhere
(:func:`raytestbed.schedulers.gavel_fifo.fifo_types`); Gavel's rounds turn it into placements, so a
job may move to a faster type when one frees up (:mod:`raytestbed.schedulers.gavel_base`).
"""

from __future__ import annotations

import numpy as np

from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.gavel_base import GavelRoundPolicy
from raytestbed.schedulers.gavel_fifo import fifo_types


@register_policy
class GavelFifoPerfPolicy(GavelRoundPolicy):
    """Gavel FIFO, heterogeneity-aware: arrival order, each job on its fastest GPU type with room (rounds)."""

    name = "fifo_perf"
    perf = True
    zero_priority_waits = True

    def allocation(self, jobs, types, T, workers, view):
        assigned = fifo_types(jobs, types, T, workers, {}, lambda i, cand: max(cand, key=lambda c: (T[i, c], -c)))
        X = np.zeros_like(T)
        col = {k: c for c, k in enumerate(types)}
        for i, j in enumerate(jobs):
            if j.job_id in assigned:
                X[i, col[assigned[j.job_id]]] = 1.0
        return X
