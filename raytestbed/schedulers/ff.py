"""First-Fit baseline of SJF-BCO: first free GPUs within the budget, server by server, bisection on theta_u.

Same smallest-job-first order, gang dispatch and re-plan adapter as SJF-BCO
(:class:`raytestbed.schedulers.sjfbco.PlanDispatchPolicy`); only the planner rule
differs (:mod:`raytestbed.placement.sjfbco_plan`).
"""

from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.sjfbco import PlanDispatchPolicy


@register_policy
class FirstFitPolicy(PlanDispatchPolicy):
    """First-Fit baseline of SJF-BCO: first free GPUs within the budget, server by server, bisection on theta_u."""

    name = "ff"
    description = "First-Fit baseline of SJF-BCO: first free GPUs within the budget, server by server, bisection on theta_u"
    role = "placement"
    rule = "ff"
