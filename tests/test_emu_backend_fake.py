"""The emulated backend's plumbing (scheduler actor <-> backend <-> executors) on real Ray actors,
with a test-only fake job runner standing in for the executors (the CLI path always uses the real
executors). Checks: arrivals replayed in emulated time, measured iteration times reach the view and
the records, a killed server's jobs are failed, restarted by the policy and every job is accounted for.
"""

import asyncio
import math

import pytest

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow  # stopgap plumbing test; the default suite runs the real-executor trials

from raytestbed.emu.backend import EmuBackend  # noqa: E402
from raytestbed.schedulers.base import IterationMeasured, JobFailed, JobFinished, ServerLost, make_policy  # noqa: E402
from raytestbed.sim.engine import Fault  # noqa: E402

from conftest import rar_job, small_cluster  # noqa: E402


class _Scale:
    def __init__(self, factor):
        self.factor = factor

    def to_emu(self, wall_s):
        return wall_s * self.factor

    def to_wall(self, emu_s):
        return emu_s / self.factor


def _call(reporter, method, *args):
    """As the executors do: a Ray actor handle or a plain reporter object."""
    m = getattr(reporter, method)
    return m.remote(*args) if hasattr(m, "remote") else m(*args)


@ray.remote(num_cpus=0)
class _FakeJob:
    """Holds its GPUs for job.compute time per iteration (wall = emulated / factor) and reports."""

    def __init__(self):
        self.stopped = False
        self.failed = False
        self.done = 0

    async def run(self, job_id, iterations, start_it, iter_emu_s, factor, reporter):
        for i in range(iterations):
            await asyncio.sleep(iter_emu_s / factor)
            if self.stopped or self.failed:
                return
            self.done += 1
            _call(reporter, "on_iteration", job_id, start_it + i, iter_emu_s, 0.75 * iter_emu_s, 0.25 * iter_emu_s)
        _call(reporter, "on_job_done", job_id, self.done)

    async def stop(self):
        self.stopped = True
        return self.done

    async def fail(self, job_id, reason, reporter):
        self.failed = True
        _call(reporter, "on_job_failed", job_id, reason)


class _FakeRun:
    def __init__(self, actor, servers):
        self.actor = actor
        self.servers = servers

    def stop(self):
        return ray.get(self.actor.stop.remote())


class FakeEmu:
    """cluster, time_scale, fabric and kill_server: what the backend needs from an EmuCluster."""

    def __init__(self, cluster, factor):
        self.cluster = cluster
        self.time_scale = _Scale(factor)
        self.fabric = None
        self.runs = {}
        self.killed = []

    def start_job(self, emu, job, placement, *, iterations, mode, reporter, start_iteration):
        a = _FakeJob.remote()
        it = sum(s.profile.compute_s for s in job.stages)
        a.run.remote(job.job_id, iterations, start_iteration, it, self.time_scale.factor, reporter)
        run = _FakeRun(a, set(placement.servers(self.cluster)))
        self.runs[job.job_id] = (run, reporter)
        return run

    def kill_server(self, m):
        self.killed.append(m)
        for jid, (run, rep) in self.runs.items():
            if m in run.servers:
                run.actor.fail.remote(jid, f"server {m} lost", rep)


@pytest.fixture(scope="module")
def ray_local():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def _run(jobs, faults=(), factor=20.0):
    emu = FakeEmu(small_cluster(2, 4), factor)
    events = []
    be = EmuBackend(emu, jobs, [make_policy("fifo", "placement", 0)], faults, on_event=events.append,
                    start_job=emu.start_job)
    res = be.run()
    return be, res, events, emu


def test_fake_trial_end_to_end(ray_local):
    # iteration = fwd 0.2 + bwd 0.4 = 0.6 emulated s; arrivals at 0 and 2 emulated s
    jobs = [rar_job(0, 0.0, workers=4, iterations=20, fwd=0.2, bwd=0.4),
            rar_job(1, 2.0, workers=8, iterations=10, fwd=0.2, bwd=0.4)]
    be, res, events, _ = _run(jobs)
    recs = {r.job.job_id: r for r in res.records}
    assert all(not math.isnan(r.finish_s) for r in recs.values())
    # job 1 needs all 8 GPUs: it starts when job 0 (20 x 0.6 s = 12 emulated s) has finished
    assert recs[1].first_start_s >= recs[0].finish_s - 1e-9
    assert recs[0].finish_s >= 12.0 - 1e-6  # never faster than its 20 reported iterations (no timed upper bound)
    assert recs[0].iteration_time_s == pytest.approx(0.6)  # the measured (reported) value, not a model
    assert sum(isinstance(e, IterationMeasured) for e in events) == 30
    st = be.measured_stats(0)
    assert st["measured_iterations"] == 20 and st["measured_compute_mean_s"] == pytest.approx(0.45, rel=0.01)
    arrived = [e.time for e in events if type(e).__name__ == "JobArrived"]
    assert arrived == [0.0, 2.0]
    info = be.emulation_info()
    assert info["time_scale"] == 20.0 and info["peak_busy_gpus"] == 8 and info["compute"] == "replay"


def test_fake_kill_server_every_job_accounted_for(ray_local):
    jobs = [rar_job(i, 0.5 * i, workers=2, iterations=15, fwd=0.2, bwd=0.4) for i in range(5)]
    be, res, events, emu = _run(jobs, faults=[Fault("kill_server", 0, 3.0)])
    assert emu.killed == [0]
    lost = [e for e in events if isinstance(e, ServerLost)]
    assert len(lost) == 1 and lost[0].failed_jobs
    failed = {e.job_id for e in events if isinstance(e, JobFailed)}
    assert failed == set(lost[0].failed_jobs)
    finished = {e.job_id for e in events if isinstance(e, JobFinished)}
    assert finished == {0, 1, 2, 3, 4}  # server 1 still holds 4 GPUs: every job completes
    recs = {r.job.job_id: r for r in res.records}
    for jid in failed:
        assert recs[jid].failures == 1
    # after the fault every start is on server 1 only
    for jid, s, e, g in res.busy_gpu_intervals:
        if s > 3.0 + 1e-6:
            assert "0x" not in recs[jid].placement
