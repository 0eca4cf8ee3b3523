"""DecisionBook: the one place both backends check decisions and keep the GPU books."""

import math

import numpy as np
import pytest

from raytestbed.core.decisions import DecisionBook, JobRecord
from raytestbed.core.placement import Placement
from raytestbed.core.state import ClusterState
from raytestbed.errors import PolicyError
from raytestbed.core.events import (
    Decision,
    JobFailed,
    Preempt,
    Resize,
    ServerLost,
    SetFlowRates,
    SetFlowWeights,
    StartJob,
    WakeUp,
)

from conftest import rar_job, small_cluster


def _book(jobs, servers=2, gpus=4):
    state = ClusterState(small_cluster(servers, gpus))
    records = {j.job_id: JobRecord(j) for j in jobs}
    busy = []
    book = DecisionBook(state, records, lambda *iv: busy.append(iv))
    for j in jobs:
        state.pending[j.job_id] = j
    return book, state, records, busy


def _snapshot(state):
    return (state.free_count.copy(), [set(s) for s in state.free], state.total_free)


@pytest.mark.parametrize("decision, message", [
    (StartJob(7, Placement(((0, 1),))), r"pol-x: StartJob for job 7, which is not pending"),
    (StartJob(1, Placement(((0, 1),))), r"pol-x: StartJob for job 1, which is not pending"),  # running
    (Preempt(0), r"pol-x: Preempt for job 0, which is not running"),
    (Resize(0, Placement(((4, 5),))), r"pol-x: Resize for job 0, which is not running"),
    (SetFlowWeights({0: 0.0}), r"pol-x: weight of job 0 must be > 0, got 0.0"),
    (SetFlowWeights({3: -1.0}), r"pol-x: weight of job 3 must be > 0"),
    (SetFlowWeights({2: math.nan}), r"pol-x: weight of job 2 must be > 0"),
    (SetFlowRates({(2, 0, 0, 0): -5.0}), r"pol-x: rate of flow \(2, 0, 0, 0\) must be >= 0"),
    (SetFlowRates({(2, 0, 0, 1): math.nan}), r"pol-x: rate of flow \(2, 0, 0, 1\) must be >= 0"),
    (WakeUp(9.0), r"pol-x: WakeUp at 9.0 s is in the past \(now 10.0 s\)"),
])
def test_each_invalid_decision_raises_policy_error_naming_policy_and_job(decision, message):
    jobs = [rar_job(0, workers=2), rar_job(1, workers=2)]
    book, state, _, _ = _book(jobs)
    state.now = 10.0
    book.start(jobs[1], Placement(((0, 1),)), 0.0)
    before = _snapshot(state)
    with pytest.raises(PolicyError, match=message):
        book.check(decision, "pol-x")
    after = _snapshot(state)  # a rejected decision changes nothing
    assert np.array_equal(before[0], after[0]) and before[1:] == after[1:]


def test_unknown_decision_and_unknown_flow():
    book, _, _, _ = _book([rar_job(0)])

    class Odd(Decision):
        pass

    with pytest.raises(PolicyError, match="pol-y: unknown decision"):
        book.check(Odd(), "pol-y")
    rates = SetFlowRates({(0, 0, 0, 0): 1.0})
    assert book.check(rates, "pol-y") is None  # no flow registry: any id
    with pytest.raises(PolicyError, match=r"pol-y: SetFlowRates for unknown flow \(0, 0, 0, 0\)"):
        book.check(rates, "pol-y", known_flow=lambda fid: False)
    assert book.check(rates, "pol-y", known_flow=lambda fid: True) is None


def test_valid_decisions_pass_and_return_the_job_to_start():
    jobs = [rar_job(0, workers=2), rar_job(1, workers=2)]
    book, state, _, _ = _book(jobs)
    state.now = 5.0
    assert book.check(StartJob(0, Placement(((0, 1),))), "p") is jobs[0]
    book.start(jobs[0], Placement(((0, 1),)), 0.0)
    assert book.check(Preempt(0), "p") is None
    assert book.check(Resize(0, Placement(((4, 5),))), "p").job_id == 0
    assert book.check(WakeUp(5.0 - 1e-12), "p") is None  # rounding slack
    assert book.wake_time(WakeUp(5.0 - 1e-12), state.now) == 5.0
    assert book.check(SetFlowWeights({0: 2.0}), "p") is None
    assert book.check(SetFlowRates({(0, 0, 0, 0): 0.0}), "p") is None
    with pytest.raises(PolicyError):  # invalid placement is caught when the GPUs are booked
        book.start(jobs[1], Placement(((0, 2),)), 0.0)


def test_book_and_unbook_gpus_round_trips():
    jobs = [rar_job(0, workers=3), rar_job(1, workers=2)]
    book, state, records, busy = _book(jobs)
    empty = _snapshot(state)
    state.now = 1.0
    rj = book.start(jobs[0], Placement(((0, 1, 4),)), 0.0)
    assert rj.start_s == 1.0 and 0 in state.running and 0 not in state.pending
    assert state.total_free == 5 and list(state.free_count) == [2, 3]
    assert records[0].first_start_s == 1.0 and records[0].servers == 2
    state.now = 3.0
    book.stop(0, "preemptions")
    assert 0 in state.pending and 0 not in state.running
    after = _snapshot(state)
    assert np.array_equal(empty[0], after[0]) and empty[1:] == after[1:]
    assert records[0].preemptions == 1 and records[0].gpu_seconds == pytest.approx(3 * 2.0)
    assert busy == [(0, 1.0, 3.0, 3)]
    # restart elsewhere keeps the first start; finish frees the GPUs and records the end
    state.now = 4.0
    book.start(jobs[0], Placement(((5, 6, 7),)), 0.0)
    book.start(jobs[1], Placement(((0, 1),)), 0.0)
    state.now = 6.0
    book.finish(0)
    assert records[0].first_start_s == 1.0 and records[0].finish_s == 6.0 and state.finished[0] == 6.0
    assert records[0].gpu_seconds == pytest.approx(6.0 + 6.0)
    book.finish(1)
    after = _snapshot(state)
    assert np.array_equal(empty[0], after[0]) and empty[1:] == after[1:]
    state.pending[1] = jobs[1]
    book.start(jobs[1], Placement(((0, 1),)), 0.0)
    with pytest.raises(ValueError, match="bogus"):
        book.stop(1, "bogus")
    assert 1 in state.running  # a rejected stop books nothing


def test_kill_server_stops_hit_jobs_counts_failures_and_loses_gpus():
    jobs = [rar_job(0, workers=2), rar_job(1, workers=2), rar_job(2, workers=2)]
    book, state, records, _ = _book(jobs)
    book.start(jobs[0], Placement(((0, 1),)), 0.0)
    book.start(jobs[1], Placement(((2, 4),)), 0.0)  # spans servers 0 and 1
    book.start(jobs[2], Placement(((5, 6),)), 0.0)
    state.now = 2.0
    stopped = []
    events = book.kill_server(0, lambda jid, count: stopped.append(jid) or book.stop(jid, count))
    assert stopped == [0, 1]
    assert isinstance(events[0], ServerLost) and events[0].failed_jobs == (0, 1)
    assert [(type(e), e.job_id) for e in events[1:]] == [(JobFailed, 0), (JobFailed, 1)]
    assert [records[j].failures for j in (0, 1, 2)] == [1, 1, 0]
    assert 0 in state.lost_servers and state.free_count[0] == 0
    assert state.total_free == 2 and sorted(state.free[1]) == [4, 7]
