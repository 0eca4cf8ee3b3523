"""Tiresias' Gittins-index variant (Gu et al., NSDI 2019, §3.2, "Tiresias-G"), ``tiresias-gittins``.

The queues and demotions of :mod:`raytestbed.schedulers.tiresias`; inside a queue, jobs are ordered
by their Gittins index instead of by arrival. For a job with attained service a in queue k, with
Delta = Q_k - a the service left before its next threshold (the last queue: unbounded), and S the
service of a job drawn from the duration distribution,

    G(a) = P(S - a <= Delta | S > a) / E[min(S - a, Delta) | S > a]

(the chance of finishing within the quantum per unit of expected service in it); the largest index
runs first. The distribution is empirical: ``prior_service_gpu_s`` (GPU-seconds of past jobs, e.g.
from a trace's history) plus the attained service of every job that finishes during the run. A job
that has attained more than every sample gets index 0; with no samples at all every index is 0 and
the order is first come, first served.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

from raytestbed.schedulers.base import register_policy
from raytestbed.schedulers.tiresias import TiresiasPolicy


def gittins_index(samples: np.ndarray, attained: float, quantum: float) -> float:
    """G(a) of the module docstring from sorted service samples (GPU-seconds); 0 if no sample exceeds a."""
    beyond = samples[samples > attained]
    if beyond.size == 0:
        return 0.0
    left = beyond - attained
    within = np.minimum(left, quantum)
    return float(np.mean(left <= quantum) / np.mean(within))


@register_policy
class TiresiasGittinsPolicy(TiresiasPolicy):
    """Tiresias-G: Tiresias' queues, ordered inside each by the Gittins index of a service distribution.

    Args:
        seed: unused.
        thresholds_gpu_s: queue thresholds, GPU-seconds.
        prior_service_gpu_s: service of past jobs (GPU-seconds) the distribution starts from.
    """

    name = "tiresias-gittins"

    def __init__(self, seed: int = 0, thresholds_gpu_s: Sequence[float] = (3600.0,),
                 prior_service_gpu_s: Sequence[float] = ()) -> None:
        super().__init__(seed, thresholds_gpu_s)
        if any(not (float(x) > 0) for x in prior_service_gpu_s):
            raise ValueError("prior_service_gpu_s must hold positive GPU-seconds")
        self._samples: list[float] = sorted(float(x) for x in prior_service_gpu_s)

    def key(self, jid: int) -> tuple:
        k = self.queue(jid)
        quantum = self.thresholds[k] - self.attained[jid] if k < len(self.thresholds) else np.inf
        g = gittins_index(np.asarray(self._samples), self.attained[jid], quantum) if self._samples else 0.0
        return (-g, self.arrival[jid], jid)

    def finished(self, jid: int) -> None:
        bisect.insort(self._samples, self.attained.get(jid, 0.0))
