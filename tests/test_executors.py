"""Executors: real training on an emulated 2-server cluster, ring all-reduce, preemption, failures."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.placement import Placement
from raytestbed.core.profile import default_profiles
from raytestbed.emu.executors import find_boundaries, plan_job, start_job
from raytestbed.emu.executors.compute import _rows
from raytestbed.errors import ConfigError
from raytestbed.models import build_model
from raytestbed.traces.jobs import build_job

sys.path.insert(0, str(Path(__file__).parent))
from conftest import small_cluster  # noqa: E402

ray = pytest.importorskip("ray")

MLP = default_profiles()["mlp-tiny"]


def _cluster():
    return small_cluster(servers=2, gpus=2, nic_gbps=1.0, intra_gbs=10.0)


@pytest.fixture(scope="module")
def emu():
    """An emulated 2-server x 2-GPU cluster (1 Gbit/s NICs, 10 GB/s inside a server), real time."""
    from raytestbed.emu.cluster import EmuCluster

    with pytest.warns(RuntimeWarning):  # 10 GB/s intra-server is faster than the host paces: fine here
        e = EmuCluster(_cluster(), time_scale=1.0)
    try:
        yield e
    finally:
        e.shutdown()


@pytest.fixture(scope="module")
def recorder(emu):
    @ray.remote(num_cpus=0)
    class Rec:
        def __init__(self):
            self.calls = []

        def on_iteration(self, *a):
            self.calls.append(("iteration",) + a)

        def on_job_done(self, *a):
            self.calls.append(("done",) + a)

        def on_job_failed(self, *a):
            self.calls.append(("failed",) + a)

        def get(self, job_id):
            return [c for c in self.calls if c[1] == job_id]

    return Rec.remote()


def _bytes_sent(emu, job_id):
    return ray.get(emu.fabric.stats.remote())["bytes_sent"].get(job_id, 0)


# ---------------------------------------------------------------- must-show: real training
def test_pipeline_two_stages_two_servers_trains(emu, recorder):
    job = build_job(11, 0.0, MLP, 2, "pipeline", 6)
    assert job.num_stages == 2
    run = start_job(emu, job, Placement(((0,), (2,))), iterations=6, mode="real", reporter=recorder)
    assert run.wait(120) and run.failure is None and run.iterations_done == 6
    losses = run.losses()
    assert len(losses) == 6 and losses[-1] < losses[0]
    # activations forward + gradients backward through the fabric: the real tensors' bytes
    assert _bytes_sent(emu, 11) == 6 * 2 * job.stages[0].profile.out_bytes
    calls = ray.get(recorder.get.remote(11))
    its = [c for c in calls if c[0] == "iteration"]
    assert [c[2] for c in its] == list(range(6))
    assert all(c[3] > 0 and c[4] > 0 and c[5] > 0 for c in its)
    assert calls[-1][:3] == ("done", 11, 6)
    # reported with when it ended on the workers' logical clocks (a wall timestamp): the last iteration's end
    ts = emu.time_scale
    assert calls[-1][3] == its[-1][6] and run.start_s < ts.to_emu(calls[-1][3] - ts.epoch) <= ts.now()


def test_rar_two_workers_equals_full_batch_sgd(emu, recorder, monkeypatch):
    import raytestbed.emu.executors.job as jobmod

    monkeypatch.setattr(jobmod.os, "cpu_count", lambda: 1)  # 2 real workers > 1 core: must be reported
    job = build_job(12, 0.0, MLP, 2, "rar", 5)
    with pytest.warns(RuntimeWarning, match="real-compute workers"):
        run = start_job(emu, job, Placement(((0, 2),)), iterations=5, mode="real", reporter=recorder)
    assert run.oversubscribed
    assert run.wait(120) and run.failure is None
    losses = run.losses()
    assert losses[-1] < losses[0]
    # the ring all-reduce sums the shard gradients: same trajectory as SGD on the whole batch
    m = build_model("mlp-tiny")
    g = 2 * MLP.batch_size
    x, y = _rows(m.make_input, g), _rows(m.make_target, g)
    opt = torch.optim.SGD(m.layers.parameters(), lr=0.05)
    ref = []
    for _ in range(5):
        out = x
        for layer in m.layers:
            out = layer(out)
        loss = m.loss(out, y)
        ref.append(float(loss.detach()))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert np.allclose(losses, ref, rtol=1e-4, atol=1e-5)
    h = job.stages[0].profile.param_bytes
    assert _bytes_sent(emu, 12) == 5 * 2 * h  # w * 2(w-1) chunks of h/w per iteration, w = 2


@pytest.mark.slow
def test_ring_allreduce_is_sum(emu):
    job = Job(13, 0.0, 1, (Stage(3, StageProfile(0.001, 0.001, 0.0, 4004.0)),), CommPattern.RAR, model="x")
    from raytestbed.emu.executors.job import JobMonitor
    from raytestbed.emu.executors.worker import StageWorker

    # three replicas on two servers, ring in GPU order 0 -> 1 -> 3 -> 0
    plan = plan_job(job, Placement(((3, 0, 1),)), emu.cluster, iterations=1)
    mon = ray.remote(JobMonitor).remote(13, 3, None, 1.0, 0)
    ws = [ray.remote(StageWorker).options(num_cpus=0).remote(s, emu.fabric, mon, emu.time_scale) for s in plan.workers]
    peers = {s.gpu: w for s, w in zip(plan.workers, ws)}
    ray.get([w.connect.remote(peers) for w in ws])
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(1001).astype(np.float32) for _ in ws]
    out = ray.get([w.allreduce.remote(0, g) for w, g in zip(ws, grads)])
    for o in out:
        assert o.shape == (1001,) and np.allclose(o, grads[0] + grads[1] + grads[2], atol=1e-5)
    for w in ws + [mon]:
        ray.kill(w)


# ---------------------------------------------------------------- replay, preemption, failures
@pytest.mark.slow
def test_replay_stop_and_ps(emu, recorder):
    job = build_job(14, 0.0, MLP, 2, "pipeline", 10_000)
    run = start_job(emu, job, Placement(((0,), (1,))), iterations=10_000, mode="replay", reporter=recorder)
    import time

    t0 = time.time()
    while len(run.records()) < 3 and time.time() - t0 < 60:
        time.sleep(0.1)
    n = run.stop()
    assert run.done() and 3 <= n < 10_000 and run.failure is None
    assert len(run.records()) == n
    assert not any(c[0] == "done" for c in ray.get(recorder.get.remote(14)))
    # parameter-server job: push/pull coflows reported by the fabric
    ps_job = build_job(15, 0.0, MLP, 2, "ps", 3, num_ps=2)
    run = start_job(emu, ps_job, Placement(((0, 2),), (0, 1)), iterations=3, mode="replay")
    assert run.wait(60) and run.failure is None and run.iterations_done == 3
    cof = ray.get(emu.fabric.stats.remote())["coflows"]
    assert {"job15:it0:push", "job15:it2:pull"} <= set(cof)
    h = ps_job.stages[0].profile.param_bytes
    assert _bytes_sent(emu, 15) == pytest.approx(3 * 2 * 2 * h, rel=1e-6)  # push + pull, every worker


@pytest.mark.slow
def test_worker_death_reports_failure(emu, recorder):
    job = build_job(16, 0.0, MLP, 2, "pipeline", 10_000)
    run = start_job(emu, job, Placement(((0,), (3,))), iterations=10_000, mode="replay", reporter=recorder)
    import time

    t0 = time.time()
    while not run.records() and time.time() - t0 < 60:
        time.sleep(0.1)
    # with the worker pool the worker is an object in GPU 3's host actor: kill that process
    ray.kill(run.hosts[1] if run.pool is not None else run.workers[1])
    assert run.wait(60) and run.failure is not None
    assert ray.get(recorder.get.remote(16))[-1][0] == "failed"
    if run.pool is not None:  # its server lives: the next run on GPU 3 gets a new host
        job = build_job(17, 0.0, MLP, 2, "pipeline", 2)
        run = start_job(emu, job, Placement(((0,), (3,))), iterations=2, mode="replay")
        assert run.wait(60) and run.failure is None and run.iterations_done == 2


# ---------------------------------------------------------------- planning (no Ray)
def test_plan_bytes_follow_asrpt_eq5():
    prof = StageProfile(0.01, 0.02, out_bytes=6e6, param_bytes=1e6)
    job = Job(1, 0.0, 1, (Stage(2, prof), Stage(3, StageProfile(0.01, 0.02, 0.0, 2e6))), CommPattern.PIPELINE)
    cl = small_cluster(servers=2, gpus=4)
    plan = plan_job(job, Placement(((0, 4), (1, 5, 2))), cl, iterations=2)
    w = plan.workers
    assert [x.act_out_bytes for x in w[:2]] == [1_000_000] * 2  # A / (k0 k1)
    assert [x.act_in_bytes for x in w[2:]] == [1_000_000] * 3
    assert w[2].ring == (1, 2, 5) and w[2].ring_pos == 0 and w[0].in_flight == 2 and w[2].in_flight == 1
    with pytest.raises(ConfigError, match="mode"):
        plan_job(job, Placement(((0, 4), (1, 5, 2))), cl, iterations=2, mode="fast")
    with pytest.raises(ConfigError, match="zoo preset"):
        plan_job(job, Placement(((0, 4), (1, 5, 2))), cl, iterations=2, mode="real")


def test_find_boundaries_matches_job_stages():
    vgg = default_profiles()["vgg19-cifar"]
    job = build_job(1, 0.0, vgg, 3, "pipeline", 1)
    b = find_boundaries(vgg, tuple(s.profile for s in job.stages))
    assert b == vgg.even_split(3)
    other = tuple(vgg.stage_profiles([0, 5, 17]))
    assert find_boundaries(vgg, other) == [0, 5, 17]
