"""List-Scheduling baseline of SJF-BCO: least-loaded GPUs within the budget, bisection on theta_u.

Same smallest-job-first order, gang dispatch and re-plan adapter as SJF-BCO
(:class:`raytestbed.schedulers.sjfbco.PlanDispatchPolicy`); only the planner rule
differs (:mod:`raytestbed.placement.sjfbco_plan`).
"""

from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.sjfbco import PlanDispatchPolicy


@register_policy
class ListSchedulingPolicy(PlanDispatchPolicy):
    """List-Scheduling baseline of SJF-BCO: least-loaded GPUs within the budget, bisection on theta_u."""

    name = "ls"
    description = "List-Scheduling baseline of SJF-BCO: least-loaded GPUs within the budget, bisection on theta_u"
    role = "placement"
    rule = "ls"
