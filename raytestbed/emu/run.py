"""One run of a job on the emulated cluster: its plan, its monitor, its participants (emulated seconds).

A job runs once per (re)start; the clock service (:mod:`raytestbed.emu.clock_service`) creates the
runs, fast-forward (:mod:`raytestbed.emu.fastforward`) skips their steady iterations and the
scheduler (:mod:`raytestbed.emu.scheduler`) follows them for the policies.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from raytestbed.core.cluster import Cluster
from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.execution.monitor import RunMonitor
from raytestbed.execution.plan import JobPlan


@dataclass
class Run:
    """One run of a job on the emulated cluster."""

    run_id: tuple
    job: Job
    placement: Placement
    plan: JobPlan
    monitor: RunMonitor
    pids: list
    start_s: float
    links: frozenset = frozenset()  #: NIC (and rack) links its inter-server traffic crosses
    changed_s: float = 0.0  #: last change of what shares its links (fast-forward needs steadiness since)
    failure: str | None = None
    ended: bool = False
    done_event: asyncio.Event = field(default_factory=asyncio.Event)


def touches(run: Run, server: int, cluster: Cluster) -> bool:
    """Whether ``run`` has a worker or a parameter server on ``server``."""
    return server in run.placement.servers(cluster) or server in run.placement.ps_servers
