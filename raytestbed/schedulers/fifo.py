"""FIFO: first-come first-served, first-fit, gang, non-preemptive.

Jobs start strictly in arrival order: while the head of the queue does not fit
in the free GPUs, nothing behind it starts. Placement is first-fit: the
lowest-id server that can hold the whole job; otherwise free GPUs are taken from
servers in id order. Parameter-server tasks go on random distinct servers
(seeded), as in Parrot's setup (parrot.md §6.1). With ``spread: random`` every
replica goes on its own server chosen at random among servers with a free GPU
(Parrot §6.1: "each PS or worker ... placed at random": distinct
servers per job); if too few servers have a free GPU, first fit is used.
"""

from __future__ import annotations

import bisect
import random
from collections import deque

from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.core.state import ClusterView, FreePool
from raytestbed.errors import PolicyError
from raytestbed.core.events import Decision, Event, JobArrived, JobFailed, StartJob
from raytestbed.core.policy import Policy
from raytestbed.schedulers.base import register_policy


def first_fit(job: Job, pool: FreePool) -> list[tuple[int, list[int]]] | None:
    """Take GPUs for ``job`` from ``pool`` by first fit; None (pool unchanged) if it does not fit.

    The lowest-id server that holds the whole job wins; otherwise free GPUs are
    taken from servers in id order.
    """
    need = job.gpus
    if need > pool.total_free:
        return None
    free = pool.free_count
    candidates = free.nonzero()[0]
    for m in candidates:
        if free[m] >= need:
            return [(int(m), pool.take(int(m), need))]
    out, left = [], need
    for m in candidates:
        take = min(int(free[m]), left)
        out.append((int(m), pool.take(int(m), take)))
        left -= take
        if left == 0:
            break
    return out


def random_ps_servers(job: Job, used: list[int], num_servers: int, rng: random.Random) -> list[int]:
    """``job.num_ps`` distinct random servers, preferring servers without the job's workers."""
    if job.num_ps == 0:
        return []
    others = [m for m in range(num_servers) if m not in set(used)]
    pool = others if len(others) >= job.num_ps else list(range(num_servers))
    if len(pool) < job.num_ps:
        return [rng.randrange(num_servers) for _ in range(job.num_ps)]
    return rng.sample(pool, job.num_ps)


def random_spread(job: Job, pool: FreePool, rng: random.Random) -> list[tuple[int, list[int]]] | None:
    """One GPU on each of ``job.gpus`` distinct random servers; None if fewer servers have a free GPU."""
    candidates = [int(m) for m in pool.free_count.nonzero()[0]]
    if len(candidates) < job.gpus:
        return None
    return [(m, pool.take(m, 1)) for m in sorted(rng.sample(candidates, job.gpus))]


@register_policy
class FifoPolicy(Policy):
    """First-come first-served, first-fit, gang, non-preemptive."""

    name = "fifo"
    description = "first-come first-served, first-fit GPU placement, gang, non-preemptive"
    role = "placement"

    def __init__(self, seed: int = 0, spread: str = "first_fit") -> None:
        super().__init__(seed)
        if spread not in ("first_fit", "random"):
            raise PolicyError(f"fifo: spread must be 'first_fit' or 'random', got {spread!r}")
        self.spread = spread
        self._queue: deque[tuple[float, int]] = deque()  # (arrival, job id), sorted
        self._rng = random.Random(seed)

    def on_event(self, event: Event, view: ClusterView) -> list[Decision]:
        if isinstance(event, JobArrived):
            self._queue.append((event.job.arrival_s, event.job.job_id))  # arrivals come in order
        elif isinstance(event, JobFailed):
            job = view.pending[event.job_id]
            bisect.insort(self._queue, (job.arrival_s, job.job_id))
        decisions: list[Decision] = []
        pool = FreePool(view)
        while self._queue:
            job = view.pending[self._queue[0][1]]
            chosen = random_spread(job, pool, self._rng) if self.spread == "random" else None
            if chosen is None:
                chosen = first_fit(job, pool)
            if chosen is None:
                break
            self._queue.popleft()
            used = [m for m, _ in chosen]
            ps = random_ps_servers(job, used, view.cluster.num_servers, self._rng)
            decisions.append(StartJob(job.job_id, Placement.fill_in_order(job, chosen, ps)))
        return decisions
