"""Real compute moves the model's bytes: a job's mini-batch is the profiled one, split over each
stage's replicas, so every replica pair exchanges Job.pair_bytes (A-SRPT's A_s / (k_s k_{s+1})).

In-process, no Ray: the workers' compute strategies (RealCompute over RealStage) are driven by hand,
payloads handed from one to the next as the worker program would.
"""

import numpy as np
import pytest

from raytestbed.core.cluster import Cluster
from raytestbed.core.placement import Placement
from raytestbed.core.profile import default_profiles
from raytestbed.execution.plan import plan_job
from raytestbed.execution.worker_program import Receive
from raytestbed.traces.jobs import build_job


def _workers(model: str, stage_gpus, job_gpus: int, stages: int, **config):
    """(job, profile, {(stage, replica): RealCompute}) of a real-compute pipeline job (``config``:
    build_job's ``boundaries`` and ``replicas``)."""
    from raytestbed.emu.executors.compute import ComputeCharge, RealStage
    from raytestbed.execution.compute import RealCompute

    prof = default_profiles()[model]
    job = build_job(1, 0.0, prof, job_gpus, "pipeline", 2, num_stages=stages, **config)
    cluster = Cluster.homogeneous(job_gpus, 1, 1e9, 1e10)
    plan = plan_job(job, Placement(stage_gpus), cluster, iterations=2, mode="real", profile=prof)
    out = {}
    for w in plan.workers:
        charges = ComputeCharge({"fwd": w.profile.fwd_s, "bwd": w.profile.bwd_s})
        out[(w.stage, w.replica)] = RealCompute(w, RealStage(w), charges)
    return job, prof, out


def _one_iteration(job, ws):
    """Forward and backward of mini-batch 0 through every stage; returns {(what, s, r, part): bytes}
    sent, the rows each replica computed and the replicas' (loss, samples)."""
    S = job.num_stages
    k = job.replicas()
    sent, rows = {}, {}
    for s in range(S):
        for r in range(k[s]):
            c = ws[(s, r)]
            c.compute("fwd", 0)
            rows[(s, r)] = len(c.stage._saved[0][0])
            for part in range(k[s + 1] if s + 1 < S else 0):
                payload, meta, n = c.outbound(("act", 0, part))
                sent[("act", s, r, part)] = n
                assert n == payload.nbytes
        if s + 1 < S:
            for q in range(k[s + 1]):
                data = [ws[(s, r)].outbound(("act", 0, q))[:2] for r in range(k[s])]
                ws[(s + 1, q)].received(Receive("act", 0, ()), data)
    for s in reversed(range(S)):
        for r in range(k[s]):
            c = ws[(s, r)]
            c.compute("bwd", 0)
            for part in range(k[s - 1] if s > 0 else 0):
                payload, _, n = c.outbound(("grad", 0, part))
                sent[("grad", s, r, part)] = n
        if s > 0:
            for q in range(k[s - 1]):
                data = [ws[(s, r)].outbound(("grad", 0, q))[:2] for r in range(k[s])]
                ws[(s - 1, q)].received(Receive("grad", 0, ()), data)
    losses = {key: c.loss(0) for key, c in ws.items() if key[0] == S - 1}
    return sent, rows, losses


@pytest.mark.parametrize("model", ["resnet-small", "mlp-tiny"])
def test_a_replicated_pipeline_moves_the_models_bytes_per_replica_pair(model):
    """2 stages x 2 replicas: every activation slice and every gradient slice is Job.pair_bytes(0)."""
    job, prof, ws = _workers(model, ((0, 1), (2, 3)), 4, 2)
    assert job.replicas() == (2, 2)
    sent, rows, losses = _one_iteration(job, ws)
    assert len(sent) == 8  # 2 x 2 activation slices forward, 2 x 2 gradient slices back
    for key, n in sent.items():
        assert n == pytest.approx(job.pair_bytes(0)), key
    # the job's mini-batch is the profiled one: each replica computes its half of it
    B = prof.batch_size
    assert rows == {(0, 0): B // 2, (0, 1): B // 2, (1, 0): B // 2, (1, 1): B // 2}
    assert sum(n for _, n in losses.values()) == B


def test_unequal_replica_counts_move_the_models_bytes():
    """1 replica -> 3 replicas: the one stage-0 replica sends each stage-1 replica A / 3 bytes (up to
    one sample: 16 samples do not split in three), and the three together compute the profiled batch once."""
    job, prof, ws = _workers("mlp-tiny", ((0,), (1, 2, 3)), 4, 2, boundaries=(0, 2), replicas=(1, 3))
    sent, rows, losses = _one_iteration(job, ws)
    B = prof.batch_size
    assert rows[(0, 0)] == B and sorted(rows[(1, r)] for r in range(3)) == [5, 5, 6]
    acts = [sent[("act", 0, 0, q)] for q in range(3)]
    assert sum(acts) == pytest.approx(job.stages[0].profile.out_bytes)
    for n in acts:
        assert n == pytest.approx(job.pair_bytes(0), abs=job.stages[0].profile.out_bytes / B)  # one sample
    for q in range(3):
        assert sent[("grad", 1, q, 0)] == sent[("act", 0, 0, q)]


def test_the_replicas_gradients_sum_to_the_one_replica_gradient_of_the_same_batch():
    """Data parallelism changes who computes which samples, not the step: the summed gradient of the
    2 x 2 job is the gradient of the same job on one GPU per stage (mlp-tiny: no batch norm)."""
    job2, _, ws2 = _workers("mlp-tiny", ((0, 1), (2, 3)), 4, 2)
    job1, _, ws1 = _workers("mlp-tiny", ((0,), (1,)), 2, 2)
    assert [st.profile for st in job1.stages] == [st.profile for st in job2.stages]
    _one_iteration(job2, ws2)
    _one_iteration(job1, ws1)
    for s in range(2):
        one = ws1[(s, 0)].stage.flat_grad(0)
        summed = ws2[(s, 0)].stage.flat_grad(0) + ws2[(s, 1)].stage.flat_grad(0)
        np.testing.assert_allclose(summed, one, rtol=1e-4, atol=1e-6)


def test_more_replicas_than_samples_take_the_smallest_multiple_of_the_batch_and_say_so():
    prof = default_profiles()["gpt-tiny"]  # batch 2
    cluster = Cluster.homogeneous(1, 4, 1e9, 1e10)
    job = build_job(7, 0.0, prof, 4, "rar", 2)
    plan = plan_job(job, Placement(((0, 1, 2, 3),)), cluster, iterations=1, mode="real", profile=prof)
    assert {w.global_batch for w in plan.workers} == {4}
    assert plan.notes == ("job 7: mini-batch 2 x 2 samples so that each of 4 replicas of a stage gets one",)
    job = build_job(8, 0.0, prof, 3, "pipeline", 2, boundaries=(0, 2), replicas=(1, 2))
    plan = plan_job(job, Placement(((0,), (1, 2))), cluster, iterations=1, mode="real", profile=prof)
    assert {w.global_batch for w in plan.workers} == {2} and plan.notes == ()
    job = build_job(9, 0.0, prof, 4, "rar", 2)
    job.extra["batch_size"] = 8
    plan = plan_job(job, Placement(((0, 1, 2, 3),)), cluster, iterations=1, mode="real", profile=prof)
    assert {w.global_batch for w in plan.workers} == {8} and plan.notes == ()


@pytest.mark.parametrize("stages", [2, 4])
def test_a_tiny_batch_on_replicated_stages_gives_every_replica_pair_a_sample(stages):
    """gpt-tiny (B = 2) with 2 replicas per stage: B = 2 gives each replica one sample but sends
    nothing from stage-0 replica r to stage-1 replica 1 (one sample cuts into [1, 0]), so a
    last-stage replica computed no sample and its loss was NaN. The plan takes 2 x 2 samples
    instead: every replica pair exchanges one, and every last-stage replica reports a finite loss."""
    job, prof, ws = _workers("gpt-tiny", tuple((2 * s, 2 * s + 1) for s in range(stages)), 2 * stages, stages,
                             boundaries=tuple(range(stages)), replicas=(2,) * stages)
    B = ws[(0, 0)].spec.global_batch
    assert B == 2 * prof.batch_size
    sent, rows, losses = _one_iteration(job, ws)
    assert all(n == B // 2 for n in rows.values()), rows
    assert all(n > 0 for key, n in sent.items()), sent
    assert len(losses) == 2 and all(np.isfinite(loss) and n == B // 2 for loss, n in losses.values()), losses


def test_replica_slices_follow_the_worker_split():
    from raytestbed.execution.plan import replica_slices

    assert replica_slices(2, (2, 2)) == [[1, 1], [1, 0, 1, 0]]
    assert replica_slices(8, (3, 2, 4)) == [[3, 3, 2], [2, 1, 2, 1, 1, 1], [2, 1, 1, 1, 1, 1, 1, 0]]
    assert min(min(c) for c in replica_slices(16, (1, 3))) > 0


def test_the_fidelity_bench_predicts_with_the_bytes_real_compute_moves():
    """gpt-tiny's 2 x 2 pipeline takes 2 x 2 samples in real compute, so `bench fidelity` feeds its
    prediction twice the model's activation bytes; a pipeline whose batch covers every pair keeps 1x."""
    from benchmarks.fidelity import SCENARIOS, activation_multiple, with_activations_times

    prof = default_profiles()["gpt-tiny"]
    for name, pattern, servers, gpus, job_gpus, stages, stage_gpus in SCENARIOS:
        if pattern != "pipeline":
            continue
        cluster = Cluster.homogeneous(servers, gpus, 1e9, 1e10)
        job = build_job(1, 0.0, prof, job_gpus, pattern, 2, num_stages=stages)
        assert activation_multiple(job, Placement(stage_gpus), cluster, prof) == (2.0 if "x2 rep" in name else 1.0)
    doubled = with_activations_times(prof, 2.0)
    assert [lay.out_bytes for lay in doubled.layers] == [2 * lay.out_bytes for lay in prof.layers]
    assert [lay.fwd_s for lay in doubled.layers] == [lay.fwd_s for lay in prof.layers]
