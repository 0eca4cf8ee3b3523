"""One coflow per communication phase of an iteration, complete only when all its flows are (spec README;
Parrot §2.2), on both backends: a ring all-reduce's steps and a late worker's push do not end it."""

import pytest

from conftest import rar_job, run_emulated_in_process, small_cluster
from raytestbed.core.events import CoflowFinished, CoflowGrew, CoflowStarted, Tick
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.policy import Policy
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
    compute with jitter): one start, the coflow grown when the late transfer starts, one finish, with all
    40 MB."""
    def early():
        yield (0.0, [Send("x", 7, 0, 4, 10 * MB, "cf", 40 * MB)], [])

    def late():
        yield (0.5, [Send("y", 7, 1, 4, 30 * MB, "cf", 40 * MB)], [])

    seen = []
    c = VirtualClock(two_servers(), on_coflow=lambda *a: seen.append(a))
    drive(c, {"a": early(), "b": late()})
    assert seen == [("started", 0.0, 7, "cf", 40 * MB), ("grew", 0.5, 7, "cf", 40 * MB),
                    ("finished", pytest.approx(0.8), 7, "cf", pytest.approx(40 * MB))]


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


class _FirstSight(Policy):
    """A network policy that decides nothing and notes, for every flow, its bytes left and its size the
    first time a coflow event shows it in the flow table (``view.flows()``), and the event that did."""

    name = "first-sight"
    role = "network"

    def __init__(self) -> None:
        super().__init__(0)
        self.first: dict[int, tuple[float, float, str]] = {}

    def on_event(self, event, view):
        if isinstance(event, (CoflowStarted, CoflowGrew, CoflowFinished)):
            f = view.flows()
            for i, key in enumerate(f.key.tolist()):  # the backend's handle: one per transfer
                self.first.setdefault(key, (float(f.remaining[i]), float(f.total[i]), event.kind))
        return []


def _contended_rings():
    """Three rings across four servers, meeting on the NICs: each all-reduce's later steps start while
    others run."""
    return [rar_job(0, 0.0, workers=4, iterations=6, grad_bytes=40 * MB),
            rar_job(1, 0.05, workers=4, iterations=6, grad_bytes=30 * MB),
            rar_job(2, 0.1, workers=2, iterations=6, grad_bytes=20 * MB)]


@pytest.mark.parametrize("backend", ["sim", "emu"])
def test_a_network_policy_sees_every_flow_of_a_coflow_before_it_has_moved_a_byte(backend):
    """A ring all-reduce's later steps join the coflow its first step started: each is reported
    (``CoflowGrew``), so a network policy sees every flow at the instant it starts, on both backends.
    Without it, a policy met a ring's later steps only at the next coflow's start or end, half sent, and
    left them to whatever rate its earlier decision left over."""
    cl = small_cluster(4, 2, nic_gbps=1, intra_gbs=10)
    watch = _FirstSight()
    fifo = make_policy("fifo", "placement", 0, spread="random")
    if backend == "sim":
        Simulator(cl, _contended_rings(), fifo, watch, mode="flow", schedule="transfers").run()
    else:
        run_emulated_in_process(cl, _contended_rings(), [fifo, watch], fast_forward=False)
    seen = watch.first.values()
    assert len(seen) > 100
    late = [(left, size) for left, size, _ in seen if left < size * (1 - 1e-12)]
    assert not late, f"{len(late)} of {len(seen)} flows first seen with bytes moved"
    assert sum(kind == "CoflowGrew" for *_, kind in seen) > len(seen) / 2  # most flows are later steps'


def _delivered(jobs, noise):
    cl = small_cluster(2, 4, nic_gbps=1)
    seen = []
    Simulator(cl, jobs, make_policy("fifo", "placement", 0), make_policy("parrot", "network", 0), mode="flow",
              on_event=seen.append, compute_noise=noise, noise_seed=(1,)).run()
    return seen


def test_a_coflow_grows_only_when_flows_join_it_after_the_instant_it_started():
    """Four workers that push at one instant start one coflow (the transfers that start with the first show
    in its ``CoflowStarted``); with compute jitter they push one after another and the coflow grows at
    each later push, never in the instant it started, at most once per coflow per instant."""
    jobs = lambda: [Job(0, 0.0, 6, (Stage(4, StageProfile(0.01, 0.02, 0.0, 8 * MB)),), CommPattern.PS, num_ps=2)]  # noqa: E731

    def push(events, kind):
        return [(e.coflow_id, e.time) for e in events if isinstance(e, kind) and e.coflow_id[2] == "push"]

    assert len(push(_delivered(jobs(), 0.0), CoflowStarted)) == 6
    assert not push(_delivered(jobs(), 0.0), CoflowGrew)  # (a pull may grow: a server pulls when its pushes are in)
    events = _delivered(jobs(), 0.05)
    started = dict(push(events, CoflowStarted))
    grew = push(events, CoflowGrew)
    assert len(started) == 6 and len(grew) >= 6
    assert all(t > started[c] for c, t in grew)
    assert len(set(grew)) == len(grew)


def test_with_eta_the_flows_that_join_a_coflow_wait_at_rate_0_for_the_next_multiple():
    """Parrot's Fig. 7 observation: flows that join a valid coflow are held at rate 0, as a newly valid
    coflow's are, and rated at the next multiple of eta; the flows it rated before keep moving."""
    cl = small_cluster(4, 2, nic_gbps=1, intra_gbs=10)
    eta = 0.05
    held, later = [], []

    def note(ev, name, dt, decisions):
        for d in decisions:
            if isinstance(ev, CoflowGrew) and type(d).__name__ == "SetFlowRates":
                flows = d.rates.flows
                held.append((ev.job_id, set(flows.coflow_job), d.rates.rates.tolist(),
                             bool((flows.remaining >= flows.total).all())))
            elif isinstance(ev, Tick) and type(d).__name__ == "SetFlowRates":
                later.append(ev.time)

    Simulator(cl, _contended_rings(), make_policy("fifo", "placement", 0, spread="random"),
              make_policy("parrot", "network", 0, observe_interval_s=eta), mode="flow", schedule="transfers",
              on_decisions=note).run()
    assert len(held) >= 10
    for job, jobs, rates, fresh in held:  # (a ring's transfers in flight show as one coflow of its job)
        assert jobs == {job} and set(rates) == {0.0} and fresh
    assert later and all(abs(t / eta - round(t / eta)) < 1e-9 for t in later)  # rated at multiples of eta
