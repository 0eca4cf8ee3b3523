"""DRF with ring-forming placement: GADGET's DRF baseline (GADGET §VI-2).

Dominant Resource Fairness (YARN / Mesos) with every job as a user. Resources:
GPUs, host memory and reserved NIC bandwidth. A job asks for N_i workers
(``job.extra["N"]``), each taking one GPU, ``mem_gb`` of memory and, when the
ring spans servers, b_i on a NIC each way; its dominant share is the largest of
N_i / total GPUs, N_i mem / total memory, N_i b_i / total NIC bandwidth.
Progressive filling with indivisible jobs serves the waiting job whose
allocation would have the smallest dominant share first (ties: arrival).
Slotted (one decision per ``slot_s``), non-preemptive, static worker count;
a job that does not fit now is skipped (later, smaller ones may start).
Workers are placed by the simple ring-forming heuristic.
"""

from __future__ import annotations

import numpy as np

from raytestbed.core.job import Job
from raytestbed.core.state import ClusterView
from raytestbed.placement.ring_embedding import RingEmbedding, greedy_ring
from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.fifo_ring import keep_running
from raytestbed.schedulers.ring_base import SlottedRingPolicy, job_b, job_mem


def drf_workers(job: Job) -> int:
    return int(job.extra.get("N", job.max_workers or job.gpus))


@register_policy
class DrfPolicy(SlottedRingPolicy):
    """Dominant resource fairness over GPUs, memory and NIC bandwidth, N_i workers, ring placement."""

    name = "drf"
    description = "GADGET baseline: dominant-resource-fair order (GPU, memory, bandwidth), N_i workers, ring placement"

    def on_arrival(self, job, view):
        self.check_fits_empty(job, drf_workers(job), view)

    def dominant_share(self, job: Job, view: ClusterView) -> float:
        c = view.cluster
        if getattr(self, "_totals", (None,))[0] is not c:
            self._totals = (c, float(c.total_gpus), float(sum(s.memory_gb for s in c.servers)),
                            float(sum(min(s.nic_egress_bps, s.nic_ingress_bps) for s in c.servers)))
        _, gpus, mem, nic = self._totals
        n = drf_workers(job)
        shares = [n / gpus]
        if mem > 0:
            shares.append(n * job_mem(job) / mem)
        shares.append(n * job_b(job) / nic)
        return float(np.max(shares))

    def decide(self, view: ClusterView) -> dict[int, RingEmbedding]:
        sub = self.substrate(view)
        targets = keep_running(view, sub)
        waiting = sorted((j for jid, j in self.arrived.items() if jid not in view.running),
                         key=lambda j: (self.dominant_share(j, view), j.arrival_s, j.job_id))
        for job in waiting:
            e = greedy_ring(job.job_id, drf_workers(job), job_b(job), sub, job_mem(job))
            if e is not None:
                sub.take(e)
                targets[job.job_id] = e
        self.slot_log.append({"t": view.now, "active": len(self.arrived), "embedded": len(targets)})
        return targets
