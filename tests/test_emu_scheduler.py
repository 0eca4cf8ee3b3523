"""The emulator's scheduler on the virtual clock, in-process (no Ray): the event core drives real
executor objects; results are checked against the simulator and against themselves."""

import math
from pathlib import Path

import pytest

from conftest import rar_job, run_emulated_in_process, small_cluster

from raytestbed.core.events import Fault, JobFailed, ServerLost, StartJob, Tick
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.placement import Placement
from raytestbed.core.policy import Policy
from raytestbed.emu.clock_actor import run_in_process
from raytestbed.emu.fastforward import FastForward
from raytestbed.errors import PolicyError
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator

MB = 1e6


def _rar_jobs():
    return [rar_job(0, 0.0, workers=4, iterations=30, grad_bytes=40 * MB),
            rar_job(1, 0.2, workers=2, iterations=50, grad_bytes=20 * MB),
            rar_job(2, 0.5, workers=2, iterations=20, grad_bytes=60 * MB),
            rar_job(3, 1.0, workers=1, iterations=40),
            rar_job(4, 1.5, workers=4, iterations=25, grad_bytes=10 * MB)]


def _finish(res):
    return {jid: r.finish_s for jid, r in res["records"].items()}


def test_rar_trial_matches_the_flow_simulator_per_job():
    """Ring all-reduce jobs on a fairly shared NIC: the emulator's measured timeline equals the
    simulator's flow timing (both run the same fluid model; FIFO makes the same decisions)."""
    cl = small_cluster(2, 4, nic_gbps=1, intra_gbs=10)
    res, events, _ = run_emulated_in_process(cl, _rar_jobs(), [make_policy("fifo", "placement", 0)],
                                             fast_forward=False)
    sim = Simulator(cl, _rar_jobs(), make_policy("fifo", "placement", 0), mode="flow").run()
    emu = _finish(res)
    for r in sim.records:
        assert emu[r.job.job_id] == pytest.approx(r.finish_s, rel=1e-6), r.job.job_id
    assert res["stats"]["late_steps"] == 0


def _long_jobs():
    """Jobs of a few hundred iterations: where fast-forward is meant to apply."""
    return [rar_job(0, 0.0, workers=4, iterations=300, grad_bytes=40 * MB),
            rar_job(1, 0.2, workers=2, iterations=500, grad_bytes=20 * MB),
            rar_job(2, 5.0, workers=2, iterations=200, grad_bytes=60 * MB),
            rar_job(3, 10.0, workers=1, iterations=400),
            rar_job(4, 15.0, workers=4, iterations=250, grad_bytes=10 * MB)]


def test_same_trial_twice_gives_identical_times():
    pol = lambda: [make_policy("fifo", "placement", 0)]  # noqa: E731
    cl = small_cluster(2, 4, nic_gbps=1, intra_gbs=10)
    a, _, _ = run_emulated_in_process(cl, _rar_jobs(), pol(), fast_forward=False)
    b, _, _ = run_emulated_in_process(cl, _rar_jobs(), pol(), fast_forward=False)
    assert _finish(a) == _finish(b)


def test_fast_forward_stays_within_one_percent_of_running_every_iteration():
    pol = lambda: [make_policy("fifo", "placement", 0)]  # noqa: E731
    cl = small_cluster(2, 4, nic_gbps=1, intra_gbs=10)
    a, _, _ = run_emulated_in_process(cl, _long_jobs(), pol(), fast_forward=False)
    ff, _, _ = run_emulated_in_process(cl, _long_jobs(), pol(), fast_forward=True)
    skipped = sum(ff["skipped"].values())
    ran = sum(len(v) for v in ff["measured"].values())
    assert skipped > 5 * ran  # it applied
    assert ran + skipped == sum(j.iterations for j in _long_jobs())
    total = lambda r: sum(x.finish_s - x.job.arrival_s for x in r["records"].values())  # noqa: E731
    assert total(ff) == pytest.approx(total(a), rel=0.01)


def test_runs_sharing_links_are_fast_forwarded_only_by_whole_common_periods():
    """workloads/trials/parity_ps.yaml (PS jobs on slow links): jobs 0 and 2 share NICs with unequal
    iteration times that drift against each other, so they run for real; jobs 5 and 6 lock into one
    1.74 s period and are skipped by whole periods. Every job then ends exactly as when every
    iteration runs (skipping the drifting pair at their mean rates moved later jobs' starts, and two
    contending PS jobs then settled into another alignment: total JCT -6.9 %)."""
    from raytestbed.config import load_trial
    from raytestbed.traces.registry import load_workload

    loaded = load_trial(Path(__file__).parent.parent / "workloads" / "trials" / "parity_ps.yaml")
    cl = loaded.cluster_config.build()
    wl = loaded.trial.workload.model_dump()
    kind = wl.pop("kind")
    jobs = lambda: load_workload(kind, dict(wl), cl, loaded.trial.seed, loaded.base_dir)  # noqa: E731
    jobs0 = jobs()
    fifo = lambda: [make_policy("fifo", "placement", loaded.trial.seed)]  # noqa: E731
    full, _, _ = run_emulated_in_process(cl, jobs0, fifo(), fast_forward=False)
    ff, _, _ = run_emulated_in_process(cl, jobs(), fifo(), fast_forward=True)
    assert ff["skipped"][5] > 0 and ff["skipped"][6] > 0
    assert ff["skipped"][0] == ff["skipped"][2] == 0
    for j in jobs0:
        assert ff["records"][j.job_id].finish_s == pytest.approx(full["records"][j.job_id].finish_s, rel=1e-9)


def test_pipeline_and_ps_jobs_finish_with_every_iteration_counted():
    s1 = StageProfile(0.010, 0.020, out_bytes=8 * MB, param_bytes=10 * MB)
    s2 = StageProfile(0.010, 0.020, out_bytes=0.0, param_bytes=5 * MB)
    jobs = [Job(0, 0.0, 40, (Stage(2, s1), Stage(2, s2)), CommPattern.PIPELINE),
            Job(1, 0.1, 30, (Stage(2, StageProfile(0.01, 0.02, 0.0, 20 * MB)),), CommPattern.PS, num_ps=1)]
    res, events, _ = run_emulated_in_process(small_cluster(2, 4), jobs, [make_policy("fifo", "placement", 0)])
    assert all(not math.isnan(r.finish_s) for r in res["records"].values())
    for j in jobs:
        assert len(res["measured"][j.job_id]) + res["skipped"][j.job_id] == j.iterations


def test_a_killed_server_fails_its_jobs_and_every_job_is_still_accounted_for():
    jobs = [rar_job(0, 0.0, workers=4, iterations=200), rar_job(1, 0.0, workers=4, iterations=200),
            rar_job(2, 0.5, workers=2, iterations=50)]
    res, events, _ = run_emulated_in_process(small_cluster(2, 4), jobs, [make_policy("fifo", "placement", 0)],
                                             faults=[Fault("kill_server", 0, 1.0)])
    lost = [e for e in events if isinstance(e, ServerLost)]
    assert len(lost) == 1 and lost[0].time == 1.0
    failed = {e.job_id for e in events if isinstance(e, JobFailed)}
    assert failed and all(res["records"][j].failures == 1 for j in failed)
    assert all(not math.isnan(r.finish_s) for r in res["records"].values())  # re-run on server 1
    for j in jobs:  # progress before the failure is kept, nothing is counted twice
        assert res["iterations_done"][j.job_id] == j.iterations


class _PreemptOnce(Policy):
    """FIFO that preempts job 0 at the first tick after 1 s and restarts it at the next."""

    name, role, description = "preempt-once", "placement", "test"

    def __init__(self):
        super().__init__()
        self.tick_interval_s = 0.5
        self.state = "run"

    def on_event(self, event, view):
        if isinstance(event, Tick) and event.time >= 1.0 and self.state == "run" and 0 in view.running:
            from raytestbed.core.events import Preempt

            self.state = "stopped"
            return [Preempt(0)]
        if isinstance(event, Tick) and self.state == "stopped" and 0 in view.pending:
            self.state = "done"
            return [StartJob(0, Placement(((0, 1),)))]
        if self.state == "run" and 0 in view.pending and view.free_count[0] >= 2:
            return [StartJob(0, Placement(((0, 1),)))]
        return []


def test_a_preempted_job_keeps_its_completed_iterations():
    jobs = [rar_job(0, 0.0, workers=2, iterations=100)]
    res, events, _ = run_emulated_in_process(small_cluster(2, 4), jobs, [_PreemptOnce()], fast_forward=False)
    rec = res["records"][0]
    assert rec.preemptions == 1 and not math.isnan(rec.finish_s)
    assert len(res["measured"][0]) == 100  # every iteration ran exactly once across the two runs
    its = [r[1] for r in res["measured"][0]]
    assert its == list(range(100))


class _Bad(Policy):
    name, role, description = "bad", "placement", "test"

    def on_event(self, event, view):
        return [StartJob(99, Placement(((0,),)))]


def test_an_invalid_decision_is_a_policy_error():
    with pytest.raises(PolicyError, match="99"):
        run_emulated_in_process(small_cluster(1, 2), [rar_job(0, 0.0, workers=1, iterations=2)], [_Bad()])


class _Never(Policy):
    name, role, description = "never", "placement", "test"

    def __init__(self):
        super().__init__()
        self.tick_interval_s = 1.0

    def on_event(self, event, view):
        return []


def test_a_trial_whose_jobs_can_never_start_ends():
    res, _, _ = run_emulated_in_process(small_cluster(1, 2), [rar_job(0, 0.0, workers=1, iterations=2)], [_Never()])
    assert math.isnan(res["records"][0].finish_s)


def test_predictions_are_recorded_at_arrival():
    jobs = [rar_job(0, 0.0, workers=4, iterations=3), rar_job(1, 1.0, workers=4, iterations=8)]
    res, _, _ = run_emulated_in_process(small_cluster(2, 4), jobs, [make_policy("asrpt-perfect", "placement", 0)])
    assert res["records"][0].predicted_iterations == 3 and res["records"][1].predicted_iterations == 8
    res, _, _ = run_emulated_in_process(small_cluster(2, 4), jobs, [make_policy("fifo", "placement", 0)])
    assert all(r.predicted_iterations is None for r in res["records"].values())


def test_a_slowed_nic_slows_both_backends_alike():
    """slow_nic:0@1s:x4 divides server 0's NIC by 4 from t = 1 s: same finish in the flow simulator
    and on the emulator's clock; the analytic simulator cannot express it and refuses it."""
    from raytestbed.trial import parse_fault

    cl = small_cluster(2, 4, nic_gbps=1, intra_gbs=10)
    jobs = lambda: [rar_job(0, 0.0, workers=8, iterations=50, grad_bytes=40 * MB)]  # noqa: E731
    fault = parse_fault("slow_nic:0@1s:x4")
    assert fault == Fault("slow_nic", 0, 1.0, 4.0)
    base = Simulator(cl, jobs(), make_policy("fifo", "placement", 0), mode="flow").run().records[0].finish_s
    sim = Simulator(cl, jobs(), make_policy("fifo", "placement", 0), mode="flow", faults=[fault]).run()
    emu, _, _ = run_emulated_in_process(cl, jobs(), [make_policy("fifo", "placement", 0)], faults=[fault],
                                        fast_forward=False)
    assert sim.records[0].finish_s > 3 * base
    assert emu["records"][0].finish_s == pytest.approx(sim.records[0].finish_s, rel=1e-9)
    with pytest.raises(ValueError, match="flow"):
        Simulator(cl, jobs(), make_policy("fifo", "placement", 0), mode="analytic", faults=[fault])
    from raytestbed.errors import ConfigError

    for bad in ("slow_nic:0@1s", "kill_server:0@1s:x2", "slow_nic:0@1s:x0"):
        with pytest.raises(ConfigError):
            parse_fault(bad)


class _Fixed(Policy):
    """Starts job j on ``places[j]`` as soon as it arrives."""

    name, role, description = "fixed", "placement", "test"

    def __init__(self, places):
        super().__init__()
        self.places = places

    def on_event(self, event, view):
        return [StartJob(j, Placement(self.places[j])) for j in sorted(view.pending)
                if all(view.free_count[self_s] > 0 for self_s in ())]


def test_a_fast_forward_window_is_cut_when_a_job_starts_on_its_links():
    """Job 0 spans both servers and fast-forwards alone; job 1 arrives later on the same NICs: the
    window is cut at that start (job 0 credited only the time that passed) and both jobs then share
    the NICs for real; the result stays within 1 % of running every iteration."""
    cl = small_cluster(2, 4, nic_gbps=1, intra_gbs=10)
    places = {0: ((0, 4),), 1: ((1, 5),)}
    jobs = lambda: [rar_job(0, 0.0, workers=2, iterations=2000, grad_bytes=20 * MB),  # noqa: E731
                    rar_job(1, 20.0, workers=2, iterations=300, grad_bytes=20 * MB)]
    full, _, _ = run_emulated_in_process(cl, jobs(), [_Fixed(places)], fast_forward=False)
    ff, _, svc = run_emulated_in_process(cl, jobs(), [_Fixed(places)], fast_forward=True)
    assert ff["stats"]["ff_windows_cut"] >= 1 and ff["skipped"][0] > 1000
    for j in (0, 1):
        assert ff["records"][j].finish_s == pytest.approx(full["records"][j].finish_s, rel=0.01)


def _contended_ps_jobs():
    """Three parameter-server jobs on two servers whose pushes and pulls meet on the NICs."""
    prof = lambda mb: StageProfile(0.01, 0.02, 0.0, mb * MB)  # noqa: E731
    return [Job(0, 0.0, 12, (Stage(4, prof(40)),), CommPattern.PS, num_ps=2),
            Job(1, 0.05, 10, (Stage(2, prof(30)),), CommPattern.PS, num_ps=2),
            Job(2, 0.1, 8, (Stage(2, prof(20)),), CommPattern.PS, num_ps=1)]


def _network_decisions(decisions):
    """(time, decision kind, flows or jobs named) of every network decision, in order."""
    out = []
    for ev, _, _, ds in decisions:
        for d in ds:
            if type(d).__name__ in ("SetFlowRates", "SetFlowWeights"):
                n = len(d.rates) if hasattr(d, "rates") else len(d.weights)
                out.append((ev.time, type(d).__name__, n))
    return out


def _contended_rar_jobs():
    """Three ring-all-reduce jobs spread over the servers, whose rings meet on the NICs."""
    return [rar_job(0, 0.0, workers=4, iterations=8, grad_bytes=40 * MB),
            rar_job(1, 0.05, workers=2, iterations=10, grad_bytes=30 * MB),
            rar_job(2, 0.1, workers=2, iterations=6, grad_bytes=20 * MB)]


def _slice_of_parity_rar_nic(jobs: int, iterations: list[int]):
    """parity_rar_nic (ring jobs spread over 4 x 2 servers, 0.1 Gbit/s NICs) with fewer, shorter jobs:
    (cluster, a maker of the jobs, the trial's timing section)."""
    from raytestbed.config import parse_trial, read_yaml
    from raytestbed.traces.registry import load_workload

    path = Path(__file__).resolve().parents[1] / "workloads" / "trials" / "parity_rar_nic.yaml"
    data = read_yaml(path)
    data["workload"].update(jobs=jobs, iterations=iterations)
    loaded = parse_trial(data, str(path), path)
    cluster = loaded.cluster_config.build()
    wl = loaded.trial.workload.model_dump()
    kind = wl.pop("kind")
    return cluster, lambda: load_workload(kind, wl, cluster, loaded.trial.seed, loaded.base_dir), loaded.trial.timing


@pytest.mark.parametrize("network", ["parrot", "parrot-wo-wc"])
def test_parrot_on_contended_nics_decides_alike_on_both_backends(network):
    """Parrot's rates follow every job's bytes sent and left continuously (eq. (10)'s theta), so a
    last-bit difference in those grows into different decisions. Both backends evaluate a flow's
    bytes from the same anchor (``core.flows.bytes_left``, moved only when its rate changes), not
    from whatever instants each happens to stop at: on a 4-job slice of parity_rar_nic the emulator
    makes the simulator's SetFlowRates, as many and at the same times, and every job ends at the
    same time to 1e-9 (with per-step bytes the two parted by 0.8 % of total JCT, 451 vs 452 rates)."""
    cl, make_jobs, timing = _slice_of_parity_rar_nic(4, [10, 20])
    pols = lambda: [make_policy("fifo", "placement", 0, spread="random"),  # noqa: E731
                    make_policy(network, "network", 0)]
    sim_dec = []
    p, n = pols()
    sim = Simulator(cl, make_jobs(), p, n, mode="flow", schedule=timing.schedule,
                    iterations_per_coflow=timing.iterations_per_coflow,
                    on_decisions=lambda ev, name, dt, ds: sim_dec.append((ev, name, dt, list(ds)))).run()
    res, _, emu_dec, _ = run_in_process(cl, make_jobs(), pols(), fast_forward=FastForward(enabled=False))
    s, e = _network_decisions(sim_dec), _network_decisions(emu_dec)
    assert len(s) >= 100  # the policy acts all along
    assert len(e) == len(s)
    assert [x[1:] for x in e] == [x[1:] for x in s]
    assert [x[0] for x in e] == pytest.approx([x[0] for x in s], rel=1e-9, abs=1e-9)
    assert len(sim.records) == len(res["records"]) == 4
    for r in sim.records:
        assert res["records"][r.job.job_id].finish_s == pytest.approx(r.finish_s, rel=1e-9), r.job.job_id


@pytest.mark.parametrize("network,jobs,eta", [("parrot", "ps", None), ("aalo", "ps", None), ("lccf-wo-wc", "ps", None),
                                              ("varys", "ps", None), ("fair", "ps", None), ("aalo", "rar", None),
                                              ("lccf", "rar", None), ("parrot", "ps", 0.05), ("aalo", "rar", 0.05)])
def test_a_network_policy_decides_alike_on_the_emulator_and_the_flow_simulator(network, jobs, eta):
    """The same network policy object gets the same flow table on both backends (view.flows(): the
    fluid model's transfers laid out as the simulator's rows), so it makes the same decisions at the
    same emulated times, and every job ends at the same time. Ring all-reduce jobs: the simulator runs
    their rings worker by worker (``schedule="transfers"``), as the emulator does. ``eta``: the policy
    observes only at multiples of that many seconds (Parrot's Fig. 7), by ``WakeUp`` on both backends."""
    cl = small_cluster(4, 2, nic_gbps=1, intra_gbs=10) if jobs == "rar" else small_cluster(2, 4, nic_gbps=1, intra_gbs=10)
    make_jobs = _contended_rar_jobs if jobs == "rar" else _contended_ps_jobs
    params = {"backfill_style": "coflowsim"} if network == "varys" else {}
    if eta is not None:
        params["observe_interval_s"] = eta
    fifo = {"spread": "random"} if jobs == "rar" else {}
    pols = lambda: [make_policy("fifo", "placement", 0, **fifo),  # noqa: E731
                    make_policy(network, "network", 0, **params)]
    sim_dec = []
    p, n = pols()
    sim = Simulator(cl, make_jobs(), p, n, mode="flow", schedule="transfers",
                    on_decisions=lambda ev, name, dt, ds: sim_dec.append((ev, name, dt, list(ds)))).run()
    res, _, emu_dec, _ = run_in_process(cl, make_jobs(), pols(), fast_forward=FastForward(enabled=False))
    s, e = _network_decisions(sim_dec), _network_decisions(emu_dec)
    assert len(s) >= 5  # the policy acts on this example
    grew = [[(ev.time, name) for ev, name, *_ in d if type(ev).__name__ == "CoflowGrew" and name == network]
            for d in (sim_dec, emu_dec)]
    if jobs == "rar" and network != "fair":  # a ring's later steps join its all-reduce: rated on both backends
        assert len(grew[0]) >= 10 and len(grew[1]) >= 10
    if eta is not None:  # some decisions wait for a multiple of eta
        assert sum(abs(t / eta - round(t / eta)) < 1e-9 and t > 0 for t, *_ in s) >= 3
    assert [x[1:] for x in e] == [x[1:] for x in s]
    assert [x[0] for x in e] == pytest.approx([x[0] for x in s], rel=1e-9, abs=1e-9)
    for r in sim.records:
        assert res["records"][r.job.job_id].finish_s == pytest.approx(r.finish_s, rel=1e-9), r.job.job_id
