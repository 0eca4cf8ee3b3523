"""Fair sharing: every job's flows get weight 1 in the weighted max-min allocator.

The neutral network policy: per-flow max-min fairness over every link, the
behaviour of TCP-like congestion control on a well-provisioned fabric. It
re-asserts equal weights whenever the set of running jobs changes (a job may
have been given another weight by an earlier policy decision).
"""

from __future__ import annotations

from raytestbed.core.state import ClusterView
from raytestbed.core.events import Decision, Event, JobFinished, JobStarted, SetFlowWeights
from raytestbed.core.policy import Policy
from raytestbed.schedulers.base import register_policy


@register_policy
class FairSharePolicy(Policy):
    """Equal weights for all jobs: per-flow max-min fair rates."""

    name = "fair"
    description = "per-flow max-min fair bandwidth sharing (equal weights), the neutral network default"
    role = "network"

    def on_event(self, event: Event, view: ClusterView) -> list[Decision]:
        if isinstance(event, (JobStarted, JobFinished)):
            return [SetFlowWeights({jid: 1.0 for jid in view.running})]
        return []
