"""GPU types in the one worker program: each worker charges its passes at its GPU type's speed
(replay and real compute), so the emulator and the flow simulator agree on heterogeneous clusters,
with preemption and the checkpoint restore cost (docs/emulator.md, "GPU types")."""

import numpy as np
import pytest

from conftest import MB, run_emulated_in_process
from raytestbed.core.cluster import Cluster, Server
from raytestbed.core.events import JobArrived, Preempt, StartJob, Tick, WakeUp
from raytestbed.core.gpu_types import GpuSpeeds
from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.placement import Placement
from raytestbed.core.policy import Policy
from raytestbed.execution.compute import RealCompute, ReplayCompute
from raytestbed.execution.plan import plan_job
from raytestbed.sim.engine import Simulator

SPEED = (("v100", 1.0), ("p100", 0.5), ("k80", 0.25))


def three_types(nic_bps=1e8):
    """Servers 0-2 of types v100, p100, k80 with 2 GPUs each (GPUs 0-1, 2-3, 4-5)."""
    servers = tuple(Server(i, 2, nic_bps, nic_bps, gpu_type=t) for i, (t, _) in enumerate(SPEED))
    return Cluster(servers, 2e8, gpu_speed=SPEED)


def pipeline(job_id, arrival=0.0, iterations=30):
    st = StageProfile(0.02, 0.04, out_bytes=4 * MB, param_bytes=2 * MB)
    return Job(job_id, arrival, iterations, (Stage(1, st), Stage(1, StageProfile(0.01, 0.03, 0, 2 * MB))),
               CommPattern.PIPELINE)


def ring(job_id, arrival=0.0, iterations=30, workers=2):
    return Job(job_id, arrival, iterations, (Stage(workers, StageProfile(0.03, 0.05, 0, 10 * MB)),), CommPattern.RAR)


def test_a_workers_replay_charge_is_its_profile_over_its_types_speed():
    c = three_types()
    job = ring(0, workers=3)
    plan = plan_job(job, Placement(((0, 2, 4),)), c, iterations=1, speeds=GpuSpeeds(c))
    assert [w.speed for w in plan.workers] == [1.0, 0.5, 0.25]
    for w, f in zip(plan.workers, (1.0, 0.5, 0.25)):
        assert ReplayCompute(w).compute("fwd", 0).seconds == pytest.approx(0.03 / f, rel=1e-15)
        assert ReplayCompute(w, scale=4).compute("bwd", 0).seconds == pytest.approx(4 * 0.05 / f, rel=1e-15)
        assert ReplayCompute(w).compute("bwd", 0).profiled_s == pytest.approx(0.05 / f, rel=1e-15)
    # no factors: every worker at the profile's speed, whatever its type
    plain = Cluster(c.servers, c.intra_bps)
    assert {w.speed for w in plan_job(job, Placement(((0, 2, 4),)), plain, iterations=1).workers} == {1.0}


class _Timer:
    def time(self, fn, *args):
        return fn(*args), 0.125  # (result, CPU seconds)


class _Stage:
    timer = _Timer()

    def backward(self, i, grad):
        return np.zeros(4, dtype=np.float32)


class _Charges:
    def charge(self, kind, cpu_s):
        return cpu_s * 2.0  # emulated seconds on the profile's GPU (a fixed compute_factor of 2)


def test_a_real_pass_is_charged_at_its_types_speed():
    """Real compute: the charge for the profile's GPU (CPU seconds x compute factor) / the type's speed."""
    c = three_types()
    job = ring(0, workers=3)
    for w in plan_job(job, Placement(((0, 2, 4),)), c, iterations=1).workers:
        ch = RealCompute(w, _Stage(), _Charges()).compute("bwd", 0)
        assert ch.seconds == pytest.approx(0.125 * 2.0 / w.speed, rel=1e-15) and ch.cpu_s == 0.125
        assert ch.profiled_s == pytest.approx(0.05 / w.speed, rel=1e-15)


class MoveAround(Policy):
    """Starts every job on ``first[j]`` at arrival; at ``move_s`` preempts the running ones and restarts
    them on ``then[j]`` (another type)."""

    name = "move-around-test"

    def __init__(self, seed=0, first=None, then=None, move_s=1.01):
        super().__init__(seed)
        self.first, self.then, self.move_s = first, then, move_s

    def on_event(self, event, view):
        if isinstance(event, JobArrived):
            jid = event.job.job_id
            out = [StartJob(jid, Placement(self.first[jid]))]
            return out + ([WakeUp(self.move_s)] if jid == 0 else [])
        if isinstance(event, Tick) and event.time == self.move_s:
            moved = [j for j in view.running if j in self.then]
            return [Preempt(j) for j in moved] + [StartJob(j, Placement(self.then[j])) for j in moved]
        return []


def test_emulator_equals_flow_timing_on_three_types_with_preemption_and_restore():
    """A ring across three types, a pipeline across two, a one-GPU job: preempted at 1.01 s and moved to
    other types, each restart restoring for 0.3 s. The emulator's clock service (in-process workers)
    and the flow simulator give every job the same finish time (the ring across types runs worker by
    worker in the simulator: its V100 replica starts its all-reduce steps before the K80 one, against
    the pipeline's activations on the same NICs)."""
    c = three_types()
    jobs = [ring(0, workers=3), pipeline(1), ring(2, workers=1, arrival=0.2)]
    first = {0: ((0, 2, 4),), 1: ((1,), (5,)), 2: ((3,),)}
    then = {0: ((4, 5, 0),), 1: ((2,), (3,)), 2: ((1,),)}
    sp = GpuSpeeds(c)
    sim = Simulator(c, jobs, MoveAround(first=first, then=then), mode="flow", speeds=sp, restore_s=0.3).run()
    res, _, _ = run_emulated_in_process(c, jobs, [MoveAround(first=first, then=then)], fast_forward=False,
                                        speeds=sp, restore_s=0.3)
    s = [r.finish_s for r in sim.records]
    e = [res["records"][j].finish_s for j in range(len(jobs))]
    assert [r.preemptions for r in sim.records] == [1, 1, 1]
    assert e == pytest.approx(s, rel=1e-9)
    # the restore and the types' speeds are in those times: the same run without them ends sooner
    fast = Simulator(c, jobs, MoveAround(first=first, then=then), mode="flow").run()
    assert all(f.finish_s < t for f, t in zip(fast.records, s))


@pytest.mark.slow
def test_hetero_parity_trial_on_both_backends(tmp_path):
    """workloads/trials/parity_hetero.yaml (three GPU types, ring and pipeline jobs, Gavel's preemptive
    max-min fairness, a 0.5 s restore): the emulator (Ray, replay) and the flow simulator give every
    job the same JCT within 1e-6 relative and the same preemptions."""
    pytest.importorskip("ray")
    from pathlib import Path

    import pandas as pd

    from raytestbed.cli import main

    trial = Path(__file__).resolve().parents[1] / "workloads" / "trials" / "parity_hetero.yaml"
    out = tmp_path / "par"
    assert main(["parity", str(trial), "--policies", "max_min_fairness_perf", "--limit", "1e-6",
                 "--out", str(out), "--quiet"]) == 0
    jobs = pd.read_csv(out / "parity_jobs.csv")
    assert len(jobs) == 12 and (jobs["rel_diff"].abs() <= 1e-6).all()
    sim = pd.read_csv(out / "sim" / "max_min_fairness_perf" / "jobs.csv")
    emu = pd.read_csv(out / "emu" / "max_min_fairness_perf" / "jobs.csv")
    assert sim["preemptions"].sum() > 0 and list(sim["preemptions"]) == list(emu["preemptions"])
