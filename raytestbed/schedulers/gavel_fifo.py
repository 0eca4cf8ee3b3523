"""Gavel's ``fifo``, here ``fifo_gavel`` (the project's ``fifo`` is the non-preemptive first-fit one).

Jobs are given a GPU type in arrival order while some type has GPUs left for them; the head of the
queue that fits nowhere stops the queue (strict FIFO). A job keeps its type until it finishes; the type
is drawn at random among those with room, as Gavel's base mode means to: ``random.Random(seed)``, one
``randrange`` per job over the types with room sorted by name, so the same seed draws the same types
as Gavel's FIFO. (Gavel's own code then assigns a stale loop variable instead of the drawn type, which
puts every job on one type; its cross-check in docs/benchmarks.md shows the effect.) GPU types are not
told apart. The allocation (1 on the job's type) runs through Gavel's rounds
(:mod:`raytestbed.schedulers.gavel_base`); jobs without a type wait.
"""

from __future__ import annotations

import numpy as np

from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.gavel_base import GAVEL_RESET_INTERVAL_S, GAVEL_ROUND_S, GavelRoundPolicy


def fifo_types(jobs, types, T, workers, kept: dict[int, str], pick) -> dict[int, str]:
    """Job id -> type: ``kept`` assignments of active jobs stay; the others in arrival order (job id)
    take a type with room, chosen by ``pick(job index, candidate type indices)``, until the queue's
    head fits nowhere."""
    left = dict(zip(types, workers.astype(int).tolist()))
    out: dict[int, str] = {}
    ids = {j.job_id for j in jobs}
    for jid, k in kept.items():
        if jid in ids and k in left:
            out[jid] = k
    sf = {j.job_id: j.gpus for j in jobs}
    for jid, k in out.items():
        left[k] -= sf[jid]
    for i, j in sorted(enumerate(jobs), key=lambda e: e[1].job_id):
        if j.job_id in out:
            continue
        cand = [c for c, k in enumerate(types) if left[k] >= j.gpus]
        if not cand:
            break
        c = pick(i, cand)
        if T[i, c] > 0:
            out[j.job_id] = types[c]
            left[types[c]] -= j.gpus
    return out


@register_policy
class GavelFifoPolicy(GavelRoundPolicy):
    """Gavel FIFO: arrival order, a random GPU type per job, kept until it finishes (rounds)."""

    name = "fifo_gavel"
    perf = False
    zero_priority_waits = True

    def __init__(self, seed: int = 0, round_s: float = GAVEL_ROUND_S,
                 reset_interval_s: float = GAVEL_RESET_INTERVAL_S) -> None:
        super().__init__(seed, round_s, reset_interval_s)
        self.assigned: dict[int, str] = {}

    def allocation(self, jobs, types, T, workers, view):
        def draw(i, cand):  # Gavel's FIFO: randrange over the types with room, sorted by name
            cand = sorted(cand, key=lambda c: types[c])
            return cand[self._rng.randrange(len(cand))]
        self.assigned = fifo_types(jobs, types, T, workers, self.assigned, draw)
        X = np.zeros_like(T)
        col = {k: c for c, k in enumerate(types)}
        for i, j in enumerate(jobs):
            if j.job_id in self.assigned:
                X[i, col[self.assigned[j.job_id]]] = 1.0
        return X
