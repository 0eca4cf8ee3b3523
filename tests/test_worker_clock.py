"""The executors' logical clock (worker.py, "Logical clock"): host message latency is not charged.

In-process, without Ray: two StageWorkers of a ring-all-reduce job on two servers talk through a
paced in-process Fabric whose every call is delayed by 30 ms of wall time (a stand-in for Ray's
control-plane latency, ~5-20 ms per message on this host). Each worker issues its transfers at its
logical time, so the fabric back-dates them and the reported iteration times are the fluid model's,
exactly, whatever the delay and the host load.
"""

from __future__ import annotations

import asyncio

import pytest

from raytestbed.core.cluster import Cluster
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.placement import Placement
from raytestbed.emu.executors.job import JobMonitor
from raytestbed.emu.executors.plan import plan_job
from raytestbed.emu.executors.worker import StageWorker
from raytestbed.emu.fabric import Fabric
from raytestbed.emu.timescale import TimeScale

MB = 1e6
NIC = 10 * MB  # bytes/s
H = 1 * MB  # parameter bytes: each of the 2 ring steps moves H/2 = 0.5 MB at 10 MB/s = 50 ms
FWD, BWD = 0.02, 0.03  # seconds of replayed compute


class _Remote:
    """Ray-handle look-alike for an in-process object: ``h.method.remote(*a)`` runs it as a task."""

    def __init__(self, obj) -> None:
        self._obj = obj

    def __getattr__(self, name):
        method = getattr(self._obj, name)

        class _Method:
            @staticmethod
            def remote(*args):
                out = method(*args)
                if asyncio.iscoroutine(out):
                    return asyncio.ensure_future(out)
                done = asyncio.get_running_loop().create_future()
                done.set_result(out)
                return done

        return _Method


class _SlowCalls(Fabric):
    """A paced fabric whose calls arrive ``delay_s`` wall seconds after they were made."""

    delay_s = 0.03

    async def transfer_span(self, *args, **kwargs):
        await asyncio.sleep(self.delay_s)
        return await super().transfer_span(*args, **kwargs)


def _run(worker_scale) -> list[dict]:
    cluster = Cluster.homogeneous(2, 1, NIC, 100 * MB)
    job = Job(1, 0.0, 2, (Stage(2, StageProfile(FWD, BWD, 0.0, H)),), CommPattern.RAR, model="x")
    plan = plan_job(job, Placement(((0, 1),)), cluster, iterations=3)

    async def main():
        scale = TimeScale(1.0)
        fabric = _SlowCalls(cluster, scale, mode="paced")
        fabric.max_backdate_wall_s = 5.0  # > any call delay: the comparison below is then exact
        mon = JobMonitor(1, 2, None, 1.0, 0)
        mon.started(scale.epoch)
        ws = [StageWorker(s, fabric, _Remote(mon), scale if worker_scale == "fabric" else 1.0)
              for s in plan.workers]
        peers = {s.gpu: _Remote(w) for s, w in zip(plan.workers, ws)}
        for w in ws:
            w.connect(peers)
        await asyncio.gather(*(w.run() for w in ws))
        return mon.records()

    return asyncio.run(main())


def test_logical_clock_reports_the_fluid_model_times_despite_slow_calls():
    rows = _run("fabric")
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    for r in rows:
        assert r["compute_s"] == pytest.approx(FWD + BWD, abs=1e-6)
        # 2(k-1) steps of H/k, k = 2; the tolerance covers only the two workers' start skew (microseconds
        # here), not the 2 x 30 ms of call delay per iteration that the wall clock would add
        assert r["comm_s"] == pytest.approx(2 * (H / 2) / NIC, abs=5e-3)


def test_without_a_shared_clock_the_call_delay_is_charged():
    """The wall-clock fallback (a bare factor) sees every 30 ms call delay: the test above can fail."""
    rows = _run("factor")
    for r in rows:
        assert r["comm_s"] >= 2 * (H / 2) / NIC + 2 * _SlowCalls.delay_s * 0.9
