"""The worker program (execution/worker_program.py) read request by request, without a backend: the
1F1B order, the ring's steps, the PS push and pull; and its driver's time and accounts."""

from raytestbed.core.job import CommPattern, Job, Stage, StageProfile
from raytestbed.core.placement import Placement
from raytestbed.execution.compute import ReplayCompute
from raytestbed.execution.driver import Driver
from raytestbed.execution.plan import plan_job, ring_chunks
from raytestbed.execution.worker_program import (Begin, Compute, End, Exchange, Receive, Report, Send, Split,
                                                 SumShards, ps_program, stage_program)

from conftest import small_cluster

MB = 1e6


def _job(replicas, comm=CommPattern.PIPELINE, iterations=3, num_ps=0) -> Job:
    stages = tuple(Stage(k, StageProfile(0.5, 1.0, out_bytes=(6 * MB if s + 1 < len(replicas) else 0.0),
                                         param_bytes=9 * MB)) for s, k in enumerate(replicas))
    return Job(0, 0.0, iterations, stages, comm, num_ps=num_ps)


def _requests(program, answers=None) -> list:
    """Every request of ``program``, answering Split / SumShards with sizes as a driver would."""
    out, value = [], None
    while True:
        try:
            req = program.send(value)
        except StopIteration:
            return out
        out.append(req)
        value = None
        if isinstance(req, Split):
            value = [1000] * req.parts
        elif isinstance(req, SumShards):
            value = 4000


def test_a_stage_keeps_s_minus_s_mini_batches_in_flight():
    """Stage 0 of 3 forwards three mini-batches before its first backward, then alternates (1F1B);
    the last stage alternates from the start."""
    plan = plan_job(_job((1, 1, 1), iterations=4), Placement(((0,), (1,), (2,))), small_cluster(1, 4), iterations=4)
    passes = lambda sp: [(r.kind, r.i) for r in _requests(stage_program(sp, lambda: 4)) if isinstance(r, Compute)]  # noqa: E731
    assert passes(plan.workers[0]) == [("fwd", 0), ("fwd", 1), ("fwd", 2), ("bwd", 0), ("fwd", 3), ("bwd", 1),
                                       ("bwd", 2), ("bwd", 3)]
    assert passes(plan.workers[2]) == [("fwd", 0), ("bwd", 0), ("fwd", 1), ("bwd", 1), ("fwd", 2), ("bwd", 2),
                                       ("fwd", 3), ("bwd", 3)]


def test_the_ring_runs_2_k_minus_1_steps_reduce_scatter_then_all_gather():
    plan = plan_job(_job((3,), CommPattern.RAR, iterations=1), Placement(((4, 0, 2),)), small_cluster(2, 4),
                    iterations=1)
    w = plan.workers[0]  # GPU 4: ring order 0, 2, 4, so position 2, successor GPU 0, predecessor position 1
    reqs = _requests(stage_program(w, lambda: 1))
    steps = [r for r in reqs if isinstance(r, Exchange)]
    assert [(r.out.dst_gpu, r.out.data, r.key, r.chunk, r.gather) for r in steps] == [
        (0, ("chunk", 0, ring_chunks(2, 3, s)[0]), (4, "ar", (0, s), 1), ring_chunks(2, 3, s)[1], s >= 2)
        for s in range(4)]
    assert {r.out.coflow_bytes for r in steps} == {4 * 3000.0}  # 2(k-1) x the gradient's bytes
    assert isinstance(reqs[-1], Report)


def test_a_ps_worker_pushes_to_every_ps_at_once_and_a_ps_pulls_when_its_shards_arrived():
    job = _job((2,), CommPattern.PS, iterations=2, num_ps=2)
    plan = plan_job(job, Placement(((0, 4),), ps_servers=(0, 1)), small_cluster(2, 4), iterations=2)
    reqs = _requests(stage_program(plan.workers[0], lambda: 2))
    sends = [r for r in reqs if isinstance(r, Send) and r.outs[0].coflow is not None]
    assert [[o.to for o in s.outs] for s in sends] == [[("ps", 0), ("ps", 1)]] * 2
    pulls = [r for r in reqs if isinstance(r, Receive) and r.what == "pull"]
    assert [r.keys for r in pulls] == [((0, "pull", j, 0), (0, "pull", j, 1)) for j in range(2)]
    ps = _requests(ps_program(plan.ps[1], lambda: 2))
    assert [type(r).__name__ for r in ps] == ["Receive", "SumShards", "Send"] * 2
    assert [o.to for o in ps[2].outs] == [0, 4] and ps[2].outs[0].coflow_bytes == 2 * 4000.0


def test_the_driver_keeps_the_workers_time_and_accounts():
    """A one-GPU job never waits for the network: each mini-batch blocks once at its end (a timer), its
    record holds the time and the compute charged (replay: the profiled seconds)."""
    plan = plan_job(_job((1,), CommPattern.RAR), Placement(((0,),)), small_cluster(1, 1), iterations=3)
    sp = plan.workers[0]
    d = Driver(stage_program, sp, ReplayCompute(sp, payloads=False), 10.0, 3)
    block, ends = d.start(), []
    while block is not None:
        assert not block.sends and not block.recvs
        ends.append(block.at)
        (rec,) = d.take_records()
        assert rec[:5] == (len(ends) - 1, 0, block.at, 1.5, 0.0)
        block = d.wake(block.at, {})
    assert ends == [11.5, 13.0, 14.5] and d.result == 3
    phases = [r for r in _requests(stage_program(sp, lambda: 1)) if isinstance(r, (Begin, End))]
    assert [getattr(r, "account", None) for r in phases] == ["comp", None, "comp", None, "comm", None]
