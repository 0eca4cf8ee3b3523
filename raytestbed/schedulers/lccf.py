"""LCCF baseline of Parrot's evaluation: least completed coflows first.

Jobs with an active coflow are served in ascending order of coflows completed so
far (ties: arrival, id), with the same greedy O3 filling (default) and optional
max-min completion (``fill_residual: true``) as :mod:`raytestbed.schedulers.aalo`. ``lccf-wo-wc`` serves only the
first job.
"""

from __future__ import annotations

from raytestbed.core.state import ClusterView
from raytestbed.schedulers.aalo import PriorityCoflowPolicy
from raytestbed.schedulers.base import register_policy


@register_policy
class LccfPolicy(PriorityCoflowPolicy):
    """Least completed coflows first, work conserving."""

    name = "lccf"
    description = "LCCF: job with the fewest completed coflows first, leftover to the others"

    def job_key(self, job_id: int, view: ClusterView) -> tuple:
        rj = view.running[job_id]
        return (rj.coflows_done, rj.job.arrival_s, job_id)


@register_policy
class LccfWoWcPolicy(LccfPolicy):
    """Least completed coflows first; only that job is served."""

    name = "lccf-wo-wc"
    description = "LCCF without work conservation: only the job with the fewest completed coflows gets bandwidth"
    work_conserving = False
