"""RAND baseline of SJF-BCO: random servers and GPUs, budget theta_u = T.

Same smallest-job-first order, gang dispatch and re-plan adapter as SJF-BCO
(:class:`raytestbed.schedulers.sjfbco.PlanDispatchPolicy`); only the planner rule
differs (:mod:`raytestbed.placement.sjfbco_plan`).
"""

from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.sjfbco import PlanDispatchPolicy


@register_policy
class RandomPolicy(PlanDispatchPolicy):
    """RAND baseline of SJF-BCO: random servers and GPUs, budget theta_u = T."""

    name = "rand"
    description = "RAND baseline of SJF-BCO: random servers and GPUs, budget theta_u = T"
    role = "placement"
    rule = "rand"
