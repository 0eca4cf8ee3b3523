"""The slotted ring policies (GADGET and its baselines) under realistic timing: every job finishes in the
flow simulator and on the emulator, the two agree, and a job's worker-iterations are counted alike on
every backend (workloads/trials/gadget12.yaml; docs/gadget_timing.md)."""

import math
from pathlib import Path

import pytest

from conftest import run_emulated_in_process, small_cluster
from raytestbed.config import load_trial
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.policy import Policy
from raytestbed.core.timing import GadgetModel
from raytestbed.core.events import Tick
from raytestbed.core.placement import Placement
from raytestbed.execution.monitor import RunMonitor
from raytestbed.core.events import Resize, StartJob
from raytestbed.schedulers.base import make_policy
from raytestbed.sim.engine import Simulator
from raytestbed.traces.gadget_workload import STEP_GRID_S, step_time
from raytestbed.traces.registry import load_workload

TRIAL = Path(__file__).resolve().parents[1] / "workloads" / "trials" / "gadget12.yaml"


def _trial():
    lt = load_trial(TRIAL)
    cluster = lt.cluster_config.build()
    wl = lt.trial.workload.model_dump()
    kind = wl.pop("kind")
    return lt, cluster, lambda: load_workload(kind, wl, cluster, lt.trial.seed, lt.base_dir)


def _policy(lt, name):
    return make_policy(name, "placement", lt.trial.seed, **lt.trial.policy_params.get(name, {}))


@pytest.mark.parametrize("name", ["gadget", "las"])
def test_a_gadget_trial_leaves_no_job_unfinished_under_flow_timing(name):
    """GADGET preempts and resizes jobs every slot; it budgets each job by the worker-iterations the
    backend reports, so a job is never retired with work left (each of the 12 jobs finishes), and flow
    timing gives the analytic model's times up to the steps lost at preemptions."""
    lt, cluster, jobs = _trial()
    pol = _policy(lt, name)
    flow = Simulator(cluster, jobs(), pol, mode="flow", model=GadgetModel()).run()
    analytic = Simulator(cluster, jobs(), _policy(lt, name), model=GadgetModel()).run()
    assert all(not math.isnan(r.finish_s) for r in flow.records), [r.job.job_id for r in flow.records
                                                                   if math.isnan(r.finish_s)]
    assert all(flow.iterations_done[j.job_id] == j.iterations for j in jobs())
    assert any(r.preemptions for r in flow.records)  # the case at issue: jobs were stopped and resumed
    jct = lambda res: sum(r.finish_s - r.job.arrival_s for r in res.records)  # noqa: E731
    assert jct(flow) == pytest.approx(jct(analytic), rel=0.01)


def test_the_emulator_runs_the_gadget_trial_as_the_flow_simulator_does():
    """In-process emulator (replay, fast-forward on) against the flow simulator: same finish per job."""
    lt, cluster, jobs = _trial()
    res, _, _ = run_emulated_in_process(cluster, jobs(), [_policy(lt, "gadget")], timeout_s=600)
    sim = Simulator(cluster, jobs(), _policy(lt, "gadget"), mode="flow", model=GadgetModel()).run()
    assert sum(res["skipped"].values()) > 0  # fast-forward applied
    for r in sim.records:
        assert res["records"][r.job.job_id].finish_s == pytest.approx(r.finish_s, rel=1e-6, abs=1e-9), r.job.job_id
    assert res["stats"]["late_steps"] == 0


def _wi_job(workers, iterations=10, fwd=0.5):
    return Job(0, 0.0, iterations, (Stage(workers, StageProfile(fwd, 0.0, 0.0, 0.0)),), CommPattern.RAR,
               max_workers=4, worker_iterations=True)


@pytest.mark.parametrize("mode", ["analytic", "flow"])
def test_worker_iterations_are_counted_per_worker_on_the_simulator(mode):
    """10 worker-iterations on 4 workers: 3 steps (the last completes 2), 2.5 in the analytic model."""
    res = Simulator(small_cluster(1, 4), [_wi_job(4)], make_policy("fifo", "placement", 0), mode=mode,
                    model=GadgetModel()).run()
    assert res.records[0].finish_s == pytest.approx(2.5 * 0.5 if mode == "analytic" else 3 * 0.5)
    assert res.iterations_done[0] == 10


class _GrowAt(Policy):
    """Starts job 0 on 1 GPU at t = 0 and resizes it to 4 GPUs at the tick of t = 2 s."""

    name, role, description = "grow", "placement", "test"

    def __init__(self):
        super().__init__(0)
        self.tick_interval_s = 2.0
        self.seen = []

    def on_event(self, event, view):
        if isinstance(event, Tick):
            self.seen.append((event.time, view.iterations_done(0)))
            if event.time == 0.0:
                return [StartJob(0, Placement(((0,),)))]
            if event.time == 2.0:
                return [Resize(0, Placement(((0, 1, 2, 3),)))]
        return []


def test_a_resized_job_keeps_its_worker_iterations_on_both_backends():
    """1 worker for 2 s (4 steps of 0.5 s: 4 worker-iterations), then 4 workers: 16 left = 4 steps.
    The policy reads the same progress on both backends; the emulator resumes from it."""
    cl = small_cluster(1, 4)
    pol = _GrowAt()
    sim = Simulator(cl, [_wi_job(1, iterations=20)], pol, mode="flow", model=GadgetModel()).run()
    assert sim.records[0].finish_s == pytest.approx(4.0)
    assert pol.seen[:2] == [(0.0, 0.0), (2.0, 4.0)]
    epol = _GrowAt()
    res, _, _ = run_emulated_in_process(cl, [_wi_job(1, iterations=20)], [epol], fast_forward=False)
    assert res["records"][0].finish_s == pytest.approx(4.0)
    assert epol.seen[:2] == pol.seen[:2]
    assert [len(v) for v in [res["measured"][0]]] == [8]  # 4 steps of 1 worker, 4 of 4 workers, none twice


def test_a_run_stopped_inside_a_fast_forward_window_keeps_only_whole_iterations():
    cut = RunMonitor(0, 1, 100, 0, 0.0)
    cut.ff_begin(10.0, 1.0)
    assert cut.done == 10
    assert cut.ff_revise(3.6) == 4  # cut short at a whole period: rounded to the nearest, the rest carried
    stopped = RunMonitor(0, 1, 100, 0, 0.0)
    stopped.ff_begin(10.0, 1.0)
    assert stopped.ff_revise(3.6, whole=True) == 3 and stopped.done == 3  # its unfinished 4th is lost


def test_step_times_sum_exactly():
    """zeta steps of a GADGET worker end at or just before the slot's end, exactly on every backend."""
    for zeta in (50, 69, 130, 169, 442, 500):
        s = step_time(60.0, zeta)
        assert s / STEP_GRID_S == int(s / STEP_GRID_S)
        t = 120.0
        for _ in range(zeta):
            t += s
        assert t == 120.0 + zeta * s and 180.0 - zeta * 1e-6 < t <= 180.0
