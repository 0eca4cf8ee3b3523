"""The emulator's scheduler core without Ray: events in emulated time, decisions booked, actions out."""

import math

import pytest

from raytestbed.emu.scheduler_actor import SchedulerCore
from raytestbed.errors import PolicyError
from raytestbed.schedulers.base import JobFailed, JobFinished, JobStarted, Policy, ServerLost, StartJob, make_policy
from raytestbed.core.placement import Placement
from raytestbed.sim.engine import Fault

from conftest import rar_job, small_cluster


def _core(jobs, faults=(), policy="fifo"):
    return SchedulerCore(small_cluster(2, 4), jobs, [make_policy(policy, "placement", 0)], faults)


def test_arrivals_starts_measurements_and_finish():
    jobs = [rar_job(0, 0.0, workers=4, iterations=3), rar_job(1, 5.0, workers=4, iterations=2),
            rar_job(2, 6.0, workers=2, iterations=1)]
    core = _core(jobs)
    assert core.next_timed() == 0.0
    core.due(0.0)
    b = core.take()
    assert [a.kind for a in b.actions] == ["start"] and b.actions[0].iterations == 3
    assert any(isinstance(e, JobStarted) for e in b.events)
    for i in range(3):
        core.on_iteration(1.0 + i, 0, i, 0.5 + i, 0.3, 0.2)
    rj = core.view.running[0]
    assert rj.iterations_done == 3
    # the first iteration of a run (pipeline fill) is left out of the estimate once later ones exist
    assert rj.iteration_time_s == pytest.approx((1.5 + 2.5) / 2)
    core.due(6.0)  # jobs 1 and 2 arrive; job 1 fits on server 1, job 2 waits behind it? (FIFO: both fit)
    b = core.take()
    started = sorted(a.job_id for a in b.actions if a.kind == "start")
    assert started == [1]  # 4 GPUs free: job 1 (4 GPUs) starts, job 2 (2 GPUs) waits (FIFO order)
    core.on_job_done(7.0, 0, 3)
    b = core.take()
    assert [a.job_id for a in b.actions if a.kind == "start"] == [2]
    fin = [e for e in b.events if isinstance(e, JobFinished)]
    assert fin and fin[0].job_id == 0 and fin[0].time == 7.0
    assert core.records[0].finish_s == 7.0 and core.records[0].gpu_seconds == pytest.approx(4 * 7.0)
    assert b.measured[0]["measured_iterations"] == 3
    core.on_job_done(8.0, 1, 2)
    core.on_job_done(9.0, 2, 1)
    b = core.take()
    assert b.done and core.unfinished == 0
    assert all(not math.isnan(r.finish_s) for r in core.records.values())


def test_kill_server_fails_hit_jobs_and_policy_restarts_them():
    jobs = [rar_job(0, 0.0, workers=4, iterations=10), rar_job(1, 0.0, workers=4, iterations=10)]
    core = _core(jobs, faults=[Fault("kill_server", 0, 3.0)])
    core.due(0.0)
    b = core.take()
    assert sorted(a.job_id for a in b.actions if a.kind == "start") == [0, 1]
    on0 = [jid for jid, rj in core.view.running.items() if 0 in rj.placement.servers(core.cluster)]
    core.on_iteration(1.0, on0[0], 0, 1.0, 0.5, 0.5)
    core.due(3.0)
    b = core.take()
    kinds = [a.kind for a in b.actions]
    assert kinds[0] == "kill" and ("stop", on0[0]) in [(a.kind, a.job_id) for a in b.actions]
    lost = [e for e in b.events if isinstance(e, ServerLost)]
    assert lost[0].failed_jobs == tuple(on0)
    assert [e.job_id for e in b.events if isinstance(e, JobFailed)] == on0
    assert core.records[on0[0]].failures == 1
    # a late failure report of the stopped run is ignored
    core.on_job_failed(3.1, on0[0], "worker died")
    assert core.records[on0[0]].failures == 1
    old_run = [a for a in b.actions if a.kind == "stop"][0].job_id
    # the other job finishes; FIFO restarts the failed one on server 1 from its iteration count
    other = 1 - on0[0]
    core.on_job_done(5.0, other, 10)
    b = core.take()
    restart = [a for a in b.actions if a.kind == "start"]
    assert restart and restart[0].job_id == on0[0] and restart[0].start_iteration == 1
    assert restart[0].iterations == 9 and set(restart[0].placement.servers(core.cluster)) == {1}
    assert old_run == on0[0]
    # reports of the old (killed) run that arrive after the restart are dropped: run ids differ
    first_run = 1 if on0[0] == 0 else 2
    core.on_job_failed(5.5, on0[0], "server 0 lost", run_id=first_run)
    core.on_iteration(5.6, on0[0], 1, 9.9, 9.9, 0.0, run_id=first_run)
    assert core.records[on0[0]].failures == 1 and core.view.running[on0[0]].iterations_done == 1
    core.on_iteration(6.0, on0[0], 1, 1.0, 0.5, 0.5, run_id=restart[0].run_id)
    assert core.view.running[on0[0]].iterations_done == 2
    core.on_job_done(9.0, on0[0], 9, run_id=restart[0].run_id)
    assert core.take().done


def test_invalid_decision_is_a_policy_error():
    class Bad(Policy):
        name = "bad-test"

        def on_event(self, event, view):
            return [StartJob(99, Placement(((0,),)))]

    core = SchedulerCore(small_cluster(1, 2), [rar_job(0, 0.0, workers=1)], [Bad()])
    with pytest.raises(PolicyError, match="not pending"):
        core.due(0.0)


def test_stuck_trial_ends_with_unfinished_jobs():
    # 8-GPU job on a cluster that loses a server before it arrives: it can never start
    jobs = [rar_job(0, 5.0, workers=8, iterations=1)]
    core = _core(jobs, faults=[Fault("kill_server", 1, 1.0)])
    core.due(1.0)
    assert not core.take().done
    core.due(5.0)
    b = core.take()
    assert b.done and core.unfinished == 1
