"""LAS (Tiresias) with ring-forming placement: GADGET's LAS baseline (GADGET §VI-2).

Least attained service, preemptive: every slot (``slot_s``) all active jobs are
ordered by the GPU time they have received so far (worker-slots, Tiresias'
attained accelerator time; ties: arrival) and admitted in that order with their
fixed worker count (``job.extra["fixed_workers"]``) while the ring-forming
heuristic finds room; a running job keeps its servers when they still fit;
jobs not admitted are preempted (progress kept). Over slots this is round robin
among jobs with equal service (Tiresias' LAS without its discretised queues).
"""

from __future__ import annotations

from raytestbed.core.state import ClusterView
from raytestbed.placement.ring_embedding import RingEmbedding, greedy_ring
from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.fifo_ring import fixed_workers
from raytestbed.schedulers.ring_base import SlottedRingPolicy, current_embedding, job_b, job_mem


@register_policy
class LasPolicy(SlottedRingPolicy):
    """Least attained service (Tiresias), preemptive, fixed workers, ring-forming placement."""

    name = "las"
    description = "GADGET baseline: least attained service (Tiresias), preemptive per slot, fixed workers, ring placement"

    def on_arrival(self, job, view):
        self.check_fits_empty(job, fixed_workers(job), view)

    def decide(self, view: ClusterView) -> dict[int, RingEmbedding]:
        sub = self.substrate(view)
        order = sorted(self.arrived.values(), key=lambda j: (self.served.get(j.job_id, 0.0), j.arrival_s, j.job_id))
        targets: dict[int, RingEmbedding] = {}
        for job in order:
            e = current_embedding(view, job.job_id)
            if e is None or e.workers != fixed_workers(job) or not sub.fits(e):
                e = greedy_ring(job.job_id, fixed_workers(job), job_b(job), sub, job_mem(job))
            if e is not None:
                sub.take(e)
                targets[job.job_id] = e
        self.slot_log.append({"t": view.now, "active": len(self.arrived), "embedded": len(targets)})
        return targets
