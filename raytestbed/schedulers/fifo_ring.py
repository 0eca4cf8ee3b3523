"""FIFO with ring-forming placement: GADGET's FIFO baseline (GADGET §VI-2).

Slotted (one decision per ``slot_s``), non-preemptive, strict arrival order: the
oldest waiting job starts with its fixed worker count (``job.extra["fixed_workers"]``,
drawn in [1, 10] and capped at N_i by the ``gadget`` workload) as soon as the
simple ring-forming heuristic (:func:`~raytestbed.placement.ring_embedding.greedy_ring`)
finds servers and links with room for it; nothing behind it starts before it.
Running jobs keep their GPUs and reserved bandwidth until they finish.
"""

from __future__ import annotations

from raytestbed.core.job import Job
from raytestbed.core.state import ClusterView
from raytestbed.placement.ring_embedding import RingEmbedding, greedy_ring
from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.ring_base import SlottedRingPolicy, current_embedding, job_b, job_mem


def fixed_workers(job: Job) -> int:
    return int(job.extra.get("fixed_workers", job.gpus))


def keep_running(view: ClusterView, sub) -> dict[int, RingEmbedding]:
    """Current embeddings of all running jobs, reserved in ``sub``."""
    out = {}
    for jid in sorted(view.running):
        e = current_embedding(view, jid)
        sub.take(e)
        out[jid] = e
    return out


@register_policy
class FifoRingPolicy(SlottedRingPolicy):
    """Slotted FIFO with fixed worker counts and ring-forming placement (GADGET baseline)."""

    name = "fifo-ring"
    description = "GADGET baseline: slotted FIFO, fixed workers, ring-forming greedy placement, non-preemptive"

    def on_arrival(self, job, view):
        self.check_fits_empty(job, fixed_workers(job), view)

    def decide(self, view: ClusterView) -> dict[int, RingEmbedding]:
        sub = self.substrate(view)
        targets = keep_running(view, sub)
        waiting = sorted((j for jid, j in self.arrived.items() if jid not in view.running),
                         key=lambda j: (j.arrival_s, j.job_id))
        for job in waiting:
            e = greedy_ring(job.job_id, fixed_workers(job), job_b(job), sub, job_mem(job))
            if e is None:
                break
            sub.take(e)
            targets[job.job_id] = e
        self.slot_log.append({"t": view.now, "active": len(self.arrived), "embedded": len(targets)})
        return targets
