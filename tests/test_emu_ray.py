"""The emulated cluster on a real local Ray: placement, real training, the virtual clock across
processes, preemption, parameter servers, failures. One EmuCluster (2 servers x 2 GPUs, 1 Gbit/s
NICs, 10 GB/s inside a server) for the module: Ray and worker-pool start-up cost seconds.
"""

import asyncio
import time

import numpy as np
import pytest
import torch

from conftest import small_cluster
from raytestbed.core.placement import Placement
from raytestbed.core.profile import default_profiles
from raytestbed.emu.clock_actor import local_service
from raytestbed.emu.fastforward import FastForward
from raytestbed.emu.executors import find_boundaries, plan_job, start_job
from raytestbed.emu.executors.compute import _rows
from raytestbed.errors import ConfigError, ServerLostError
from raytestbed.models import build_model
from raytestbed.traces.jobs import build_job

ray = pytest.importorskip("ray")

MLP = default_profiles()["mlp-tiny"]


def _cluster():
    return small_cluster(servers=2, gpus=2, nic_gbps=1.0, intra_gbs=10.0)


@pytest.fixture(scope="module")
def emu():
    from raytestbed.emu.cluster import EmuCluster

    e = EmuCluster(_cluster(), fast_forward=FastForward(enabled=False), num_cpus=2)
    try:
        yield e
    finally:
        e.shutdown()


def _bytes_sent(emu, job_id):
    return emu.clock_stats()["bytes_sent"].get(job_id, 0)


def _in_process(job, placement, iterations, mode="replay"):
    """The same run on the clock service with in-process workers (no Ray)."""
    async def main():
        svc = local_service(_cluster(), fast_forward=FastForward(enabled=False))
        rid = await svc.start_run(job, placement, iterations, mode)
        info = await svc.wait_run(rid, 60)
        svc._loop_task.cancel()
        return info

    return asyncio.run(main())


def test_workers_are_placed_with_their_server(emu):
    @ray.remote
    class Worker:
        def node(self):
            return ray.get_runtime_context().get_node_id()

    ws = [Worker.options(**emu.worker_options(g)).remote() for g in (0, 2)]  # one per server
    nodes = ray.get([w.node.remote() for w in ws])
    assert set(nodes) == set(emu.server_nodes().values())
    for w in ws:
        ray.kill(w)


def test_a_replay_run_on_ray_has_the_same_timeline_as_in_process(emu):
    """Ray processes, their latency and the host's load do not move the virtual clock."""
    job = build_job(21, 0.0, MLP, 2, "pipeline", 8)
    place = Placement(((0,), (2,)))
    run = start_job(emu, job, place, iterations=8, mode="replay")
    assert run.wait(120) and run.failure is None and run.iterations_done == 8
    t0 = run.records()[0]["end_s"] - run.records()[0]["iter_s"]  # the run's start on the cluster's clock
    local = _in_process(job, place, 8)
    got = [x for r in run.records() for x in (r["end_s"] - t0, r["iter_s"])]
    assert got == pytest.approx([x for r in local["rows"] for x in (r[0], r[2])], rel=1e-9, abs=1e-12)


def test_pipeline_two_stages_two_servers_trains(emu):
    job = build_job(11, 0.0, MLP, 2, "pipeline", 6)
    assert job.num_stages == 2
    before = _bytes_sent(emu, 11)
    run = start_job(emu, job, Placement(((0,), (2,))), iterations=6, mode="real")
    assert run.wait(120) and run.failure is None and run.iterations_done == 6
    losses = run.losses()
    assert len(losses) == 6 and losses[-1] < losses[0]
    # activations forward + gradients backward through the fabric: the real tensors' bytes
    assert _bytes_sent(emu, 11) - before == 6 * 2 * job.stages[0].profile.out_bytes
    rows = run.records()
    assert [r["iteration"] for r in rows] == list(range(6))
    assert all(r["iter_s"] > 0 and r["compute_s"] > 0 and r["comm_s"] > 0 and r["cpu_s"] > 0 for r in rows)
    assert all(0 < r["charge_ratio"] < float("inf") for r in rows)  # measured charge over the profile


def test_rar_two_workers_equals_full_batch_sgd(emu):
    job = build_job(12, 0.0, MLP, 2, "rar", 5)
    run = start_job(emu, job, Placement(((0, 2),)), iterations=5, mode="real")
    assert run.wait(120) and run.failure is None
    losses = run.losses()
    assert losses[-1] < losses[0]
    # the ring all-reduce sums the shard gradients: same trajectory as SGD on the whole batch
    m = build_model("mlp-tiny")
    g = MLP.batch_size  # the job's mini-batch is the profiled one, half of it on each worker
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


def test_preempt_and_restart_on_the_same_gpus_finishes_every_iteration(emu):
    pids = ray.get([h.pid.remote() for h in emu.pool.hosts])
    total = 400
    job = build_job(1, 0.0, MLP, 2, "pipeline", total)
    place = Placement(((1,), (3,)))
    run = start_job(emu, job, place, iterations=total, mode="replay")
    t0 = time.time()
    while len(run.records()) < 3 and time.time() - t0 < 60:
        time.sleep(0.05)
    done = run.stop()
    assert 3 <= done < total and run.done()
    assert [r["iteration"] for r in run.records()] == list(range(done))
    run2 = start_job(emu, job, place, iterations=total - done, mode="replay", start_iteration=done)
    assert run2.wait(120) and run2.failure is None and run2.iterations_done == total - done
    assert [r["iteration"] for r in run2.records()] == list(range(done, total))
    assert ray.get([h.pid.remote() for h in emu.pool.hosts]) == pids  # no actor was killed or created


def test_parameter_server_job_pushes_and_pulls(emu):
    ps_job = build_job(15, 0.0, MLP, 2, "ps", 3, num_ps=2)
    before = _bytes_sent(emu, 15)
    run = start_job(emu, ps_job, Placement(((0, 2),), (0, 1)), iterations=3, mode="replay")
    assert run.wait(60) and run.failure is None and run.iterations_done == 3
    h = ps_job.stages[0].profile.param_bytes
    assert _bytes_sent(emu, 15) - before == pytest.approx(3 * 2 * 2 * h, rel=1e-6)  # push + pull, every worker


def test_kill_server_fails_only_the_job_on_it(emu):
    """Last in the module: server 1 stays dead."""
    on1 = start_job(emu, build_job(3, 0.0, MLP, 1, "rar", 10_000_000), Placement(((2,),)), iterations=10_000_000)
    on0 = start_job(emu, build_job(4, 0.0, MLP, 2, "rar", 30), Placement(((0, 1),)), iterations=30)
    t0 = time.time()
    while not on1.records() and time.time() - t0 < 60:
        time.sleep(0.05)
    host2 = emu.pool.host(2)
    emu.kill_server(1)
    assert on1.wait(60) and on1.failure is not None and "lost" in on1.failure
    assert on0.wait(120) and on0.failure is None and on0.iterations_done == 30
    deadline = time.monotonic() + 30  # the server's hosts die with its placement group (asynchronously)
    with pytest.raises(ray.exceptions.RayActorError):
        while time.monotonic() < deadline:
            ray.get(host2.ping.remote(), timeout=30)
            time.sleep(0.1)
    with pytest.raises(ServerLostError):
        emu.worker_options(2)
    assert emu.alive_servers() == {0}
    again = start_job(emu, build_job(5, 0.0, MLP, 1, "rar", 2), Placement(((3,),)), iterations=2)
    assert again.wait(60) and again.failure is not None and "lost" in again.failure
    ok = start_job(emu, build_job(6, 0.0, MLP, 2, "rar", 2), Placement(((0, 1),)), iterations=2)
    assert ok.wait(60) and ok.failure is None and ok.iterations_done == 2


# ---------------------------------------------------------------- planning (no Ray)
def test_plan_bytes_follow_asrpt_eq5():
    from raytestbed.core.job import CommPattern, Job, Stage, StageProfile

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
