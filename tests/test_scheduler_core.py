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


# ---------------------------------------------------------------- logical timestamps (no Ray)

def test_start_actions_carry_the_decision_time():
    core = _core([rar_job(0, 0.0, workers=4, iterations=3), rar_job(1, 0.0, workers=8, iterations=1)])
    core.due(0.0)
    core.take()
    core.on_job_done(2.5, 0, 3)  # job 1 (8 GPUs) can start only now
    (a,) = [a for a in core.take().actions if a.kind == "start"]
    assert a.job_id == 1 and a.start_s == 2.5 and core.records[1].first_start_s == 2.5


def test_coflow_events_are_stamped_when_they_happened_in_order():
    from raytestbed.schedulers.base import CoflowFinished, CoflowStarted

    core = _core([rar_job(0, 0.0, workers=4, iterations=3)])
    core.due(0.0)
    core.take()
    stats = {"bytes_sent": {0: 10.0}, "coflows": {
        "j0-b": {"job_id": 0, "start_s": 101.2, "end_s": 101.5, "bytes": 5.0},
        "j0-a": {"job_id": 0, "start_s": 100.7, "end_s": None, "bytes": 5.0}}}
    core.on_fabric_stats(3.0, stats, fabric_to_trial_s=-99.0)  # fabric clock 99 s ahead of the trial's
    evs = [e for e in core.take().events if isinstance(e, (CoflowStarted, CoflowFinished))]
    assert [(type(e).__name__, e.time) for e in evs] == [
        ("CoflowStarted", pytest.approx(1.7)), ("CoflowStarted", pytest.approx(2.2)),
        ("CoflowFinished", pytest.approx(2.5))]
    assert core.state.now == pytest.approx(2.5)  # not moved on to the poll's 3.0
    assert core.view.running[0].bytes_sent == 10.0
    # a stamp after the poll is clamped to the poll; one before the clock's last event to that event
    late = {"coflows": {"j0-c": {"job_id": 0, "start_s": 110.0, "end_s": None, "bytes": 1.0},
                        "j0-d": {"job_id": 0, "start_s": 90.0, "end_s": None, "bytes": 1.0}}}
    core.on_fabric_stats(4.0, late, fabric_to_trial_s=-99.0)
    assert [e.time for e in core.take().events if isinstance(e, CoflowStarted)] == [2.5, 4.0]


def test_actor_stamps_reports_with_their_logical_time_never_in_the_future():
    import time

    from raytestbed.emu.scheduler_actor import SchedulerActor

    actor = SchedulerActor(small_cluster(1, 2), [], [make_policy("fifo", "placement", 0)], [], factor=2.0,
                           fabric_epoch=1000.0)
    actor.epoch = time.time() - 10.0  # the trial began 10 wall s (20 emulated s) ago
    assert actor._stamp(actor.epoch + 4.0) == pytest.approx(8.0)
    assert actor._stamp(time.time() + 60.0) == pytest.approx(actor._now(), abs=0.1)  # clamped to now
    assert actor._stamp(None) == pytest.approx(actor._now(), abs=0.1)
    assert actor._fabric_to_trial_s() == pytest.approx((1000.0 - actor.epoch) * 2.0)


def test_a_run_starts_at_its_decision_but_no_earlier_than_the_backdating_cap():
    from raytestbed.emu.executors.job import _start_time
    from raytestbed.emu.fabric import MAX_BACKDATE_WALL_S
    from raytestbed.emu.timescale import TimeScale

    ts = TimeScale(4.0)
    ts.epoch -= 100.0  # the fabric's clock reads ~400 emulated s
    now = ts.now()
    assert _start_time(ts, None) == pytest.approx(now, abs=0.1)
    assert _start_time(ts, now - 0.5) == pytest.approx(now - 0.5, abs=0.1)  # 0.125 wall s ago: credited
    cap = 4.0 * MAX_BACKDATE_WALL_S
    assert _start_time(ts, now - 50.0) == pytest.approx(now - cap, abs=0.1)  # stale: clamped
    assert _start_time(ts, now + 50.0) == pytest.approx(now, abs=0.1)  # never in the future
