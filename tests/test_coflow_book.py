"""One coflow per communication phase of an iteration, complete only when all its flows are (spec README;
Parrot §2.2), on both backends: a ring all-reduce's steps and a late worker's push do not end it."""

import pytest

from conftest import rar_job, run_emulated_in_process, small_cluster
from raytestbed.core.events import CoflowFinished, CoflowStarted
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.emu.vclock import Send, VirtualClock
from raytestbed.network.coflow_book import CoflowBook
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator
from test_vclock import MB, drive, two_servers


def test_a_coflow_with_no_transfer_in_flight_is_still_open_until_its_bytes_have_moved():
    book = CoflowBook()
    assert book.start("c", 30.0, owner="run") is True
    assert book.arrive("c", 10.0) is None  # nothing in flight, 20 bytes to go
    assert book.start("c", 30.0, owner="run") is False  # the next step is the same coflow
    assert book.start("c", 30.0, owner="run") is False
    assert book.arrive("c", 10.0) is None
    assert book.arrive("c", 10.0) == 30.0 and "c" not in book


def test_a_coflow_of_unknown_size_ends_when_nothing_is_in_flight():
    book = CoflowBook()
    book.start("c", 0.0)
    assert book.arrive("c", 5.0) == 5.0


def test_dropping_a_run_forgets_its_open_coflows_only():
    book = CoflowBook()
    book.start("a", 10.0, owner=1)
    book.start("b", 10.0, owner=2)
    book.drop(1)
    assert "a" not in book and "b" in book and len(book) == 1


def test_a_late_senders_transfer_belongs_to_the_coflow_it_names():
    """Two workers push one coflow of 40 MB; the second starts after the first arrived (as under real
    compute with jitter): one start, one finish, with all 40 MB."""
    def early():
        yield (0.0, [Send("x", 7, 0, 4, 10 * MB, "cf", 40 * MB)], [])

    def late():
        yield (0.5, [Send("y", 7, 1, 4, 30 * MB, "cf", 40 * MB)], [])

    seen = []
    c = VirtualClock(two_servers(), on_coflow=lambda *a: seen.append(a))
    drive(c, {"a": early(), "b": late()})
    assert seen == [("started", 0.0, 7, "cf", 40 * MB), ("finished", pytest.approx(0.8), 7, "cf", pytest.approx(40 * MB))]


def _coflow_counts(events):
    started = [e for e in events if isinstance(e, CoflowStarted)]
    finished = [e for e in events if isinstance(e, CoflowFinished)]
    return started, finished


def _sim_events(cl, jobs):
    sim = Simulator(cl, jobs, make_policy("fifo", "placement", 0), mode="flow")
    seen = []
    emit = sim.emit_settled

    def keep(ev):
        seen.append(ev)
        return emit(ev)

    sim.emit_settled = keep
    sim.run()
    return seen


@pytest.mark.parametrize("backend", ["sim", "emu"])
def test_a_ring_all_reduce_is_one_coflow_per_iteration_on_both_backends(backend):
    """A 4-worker ring across two servers: 2(k-1) = 6 steps per all-reduce, one coflow of 6 h bytes."""
    cl = small_cluster(2, 2, nic_gbps=10)
    iters, grad = 5, 8 * MB
    jobs = [rar_job(0, 0.0, workers=4, iterations=iters, grad_bytes=grad)]
    if backend == "sim":
        events = _sim_events(cl, jobs)
    else:
        _, events, _ = run_emulated_in_process(cl, jobs, [make_policy("fifo", "placement", 0)], fast_forward=False)
    started, finished = _coflow_counts(events)
    assert len(started) == len(finished) == iters
    assert len({e.coflow_id for e in started}) == iters
    assert all(e.bytes == pytest.approx(6 * grad) for e in started + finished)


def test_parameter_server_push_and_pull_are_two_coflows_per_iteration_on_both_backends():
    cl = small_cluster(2, 4, nic_gbps=1)
    jobs = lambda: [Job(0, 0.0, 6, (Stage(4, StageProfile(0.01, 0.02, 0.0, 8 * MB)),), CommPattern.PS, num_ps=2)]  # noqa: E731
    _, emu_events, _ = run_emulated_in_process(cl, jobs(), [make_policy("fifo", "placement", 0)], fast_forward=False)
    for events in (emu_events, _sim_events(cl, jobs())):
        started, finished = _coflow_counts(events)
        assert len(started) == len(finished) == 2 * 6
