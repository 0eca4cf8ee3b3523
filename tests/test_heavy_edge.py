"""Heavy-Edge GPU mapping (A-SRPT §IV-B): job graph, greedy with both special cases, determinism."""

import itertools
import random

import pytest

from conftest import MB, small_cluster
from raytestbed.core.job import AllReduceKind, CommPattern, Job, Stage, StageProfile
from raytestbed.core.timing import asrpt_alpha_min_tilde, asrpt_iteration_time, contiguous_mapper
from raytestbed.placement.heavy_edge import (
    heavy_edge_assignment,
    heavy_edge_counts,
    heavy_edge_mapper,
    heavy_edge_partition,
    heavy_edge_placement,
    job_graph,
    nccl_double_binary_tree,
)


def fig2_job(out1=2 * MB, out2=2 * MB, h=(20 * MB, 10 * MB, 5 * MB)):
    """Paper Fig. 2: 3 stages x 2 replicas; stage-1 AllReduce 20 MB, 1 MB inter-stage pair edges."""
    st = (Stage(2, StageProfile(0.01, 0.02, out1, h[0])), Stage(2, StageProfile(0.01, 0.02, out2, h[1])),
          Stage(2, StageProfile(0.01, 0.02, 0.0, h[2])))
    return Job(0, 0.0, 10, st, CommPattern.PIPELINE)


def test_graph_weights_follow_the_paper():
    g = job_graph(fig2_job())
    assert g.vertices == ((0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1))
    w = g.weights
    assert w[0][1] == pytest.approx(20 * MB)  # RAR, k=2: one edge of weight 2(k-1)h/k = h
    assert w[0][2] == w[0][3] == w[1][2] == pytest.approx(1 * MB)  # 2 A / (k_{s-1} k_s)
    assert w[0][4] == 0.0  # no edge between stage 1 and stage 3
    assert len(g.edges()) == 3 + 4 + 4


def test_ring_and_tree_edges():
    st = (Stage(5, StageProfile(0.01, 0.01, 0.0, 10 * MB)),)
    ring = job_graph(Job(0, 0.0, 1, st, CommPattern.RAR))
    assert sorted((u, v) for u, v, _ in ring.edges()) == [(0, 1), (0, 4), (1, 2), (2, 3), (3, 4)]
    assert all(w == pytest.approx(2 * 4 * 10 * MB / 5) for *_, w in ring.edges())
    tree = job_graph(Job(0, 0.0, 1, st, CommPattern.RAR, allreduce=AllReduceKind.TREE))
    # NCCL btree over 5 ranks (root 0 -> 4 -> 2 -> {1, 3}); tree 2 = tree 1 shifted by one rank
    t = nccl_double_binary_tree(5)
    assert {(p, c) for p, c, tr in t if tr == 0} == {(2, 1), (4, 2), (2, 3), (0, 4)}
    assert {(p, c) for p, c, tr in t if tr == 1} == {(3, 2), (0, 3), (3, 4), (1, 0)}
    base = 4 * 10 * MB / 5
    weights = {(u, v): w for u, v, w in tree.edges()}
    assert weights[(2, 4)] == pytest.approx(base)  # tree 1 only
    assert weights[(2, 3)] == pytest.approx(2 * base)  # 2-3 in tree 1 and 3-2 in tree 2: summed
    assert len(weights) == 7
    # k = 2: both trees join the same pair -> one edge of weight h, identical to RAR
    two = (Stage(2, StageProfile(0.01, 0.01, 0.0, 10 * MB)),)
    e_tree = job_graph(Job(0, 0.0, 1, two, CommPattern.RAR, allreduce=AllReduceKind.TREE)).edges()
    e_ring = job_graph(Job(0, 0.0, 1, two, CommPattern.RAR)).edges()
    assert e_tree == e_ring == [(0, 1, pytest.approx(10 * MB))]


def test_tree_pair_in_both_trees_gets_summed_weight():
    st = (Stage(4, StageProfile(0.01, 0.01, 0.0, 8 * MB)),)
    tree = job_graph(Job(0, 0.0, 1, st, CommPattern.RAR, allreduce=AllReduceKind.TREE))
    t = nccl_double_binary_tree(4)
    pairs = [tuple(sorted((p, c))) for p, c, _ in t]
    base = 3 * 8 * MB / 4
    for (u, v), n in ((p, pairs.count(p)) for p in set(pairs)):
        assert tree.weights[u][v] == pytest.approx(n * base)


def test_fig2_example_gives_the_paper_placement():
    job = fig2_job()
    assign = heavy_edge_assignment(job, [4, 1, 1])
    assert sorted(assign[0]) == [(0, 0), (0, 1), (1, 0), (1, 1)]  # S1 pair, then the S2 replicas
    assert assign[1] == [(2, 0)] and assign[2] == [(2, 1)]  # special case 2: one stage-3 replica each
    assert heavy_edge_counts(job, [4, 1, 1]) == [[2, 2, 0], [0, 0, 1], [0, 0, 1]]
    # capacities given in another order: same partition, reported in the given order
    assert heavy_edge_counts(job, [1, 4, 1]) == [[0, 0, 1], [2, 2, 0], [0, 0, 1]]


def test_special_case_one_takes_everything_left():
    job = fig2_job()
    g = job_graph(job)
    assert heavy_edge_partition(g, [6]) == [[0, 1, 2, 3, 4, 5]]
    parts = heavy_edge_partition(g, [2, 4])
    assert sorted(parts[1]) == [0, 1, 2, 3] and sorted(parts[0]) == [4, 5]


def test_single_gpu_servers_take_least_connected_vertex():
    # A (2 replicas, heavy all-reduce) -> B (1 replica, 40 MB edges) -> C (1 replica, 2 MB edge)
    st = (Stage(2, StageProfile(0.01, 0.02, 40 * MB, 50 * MB)), Stage(1, StageProfile(0.01, 0.02, 1 * MB, 0)),
          Stage(1, StageProfile(0.01, 0.02, 0.0, 0)))
    job = Job(0, 0.0, 1, st, CommPattern.PIPELINE)
    assign = heavy_edge_assignment(job, [2, 1, 1])
    assert sorted(assign[0]) == [(0, 0), (0, 1)]
    assert assign[1] == [(2, 0)]  # C: total incident weight 2 MB < B's 82 MB
    assert assign[2] == [(1, 0)]  # special case 1: the last vertex fills the last server


def test_random_fallback_is_seeded_and_valid():
    # no edges at all: every pick is the random fallback
    st = (Stage(6, StageProfile(0.01, 0.02, 0.0, 0.0)),)
    job = Job(0, 0.0, 1, st, CommPattern.RAR)
    a = heavy_edge_assignment(job, [3, 3], seed=1)
    assert a == heavy_edge_assignment(job, [3, 3], seed=1)
    assert sorted(v for p in a for v in p) == [(0, r) for r in range(6)]
    outs = {tuple(map(tuple, heavy_edge_assignment(job, [3, 3], seed=s))) for s in range(20)}
    assert len(outs) > 1  # the seed matters


@pytest.mark.parametrize("trial", range(30))
def test_placements_are_valid_and_deterministic(trial):
    rng = random.Random(trial)
    k = [rng.randint(1, 4) for _ in range(rng.randint(1, 4))]
    st = tuple(Stage(x, StageProfile(0.01, 0.02, rng.choice([0, 1, 4]) * MB, rng.choice([0, 5, 50]) * MB))
               for x in k)
    job = Job(trial, 0.0, 1, st, CommPattern.PIPELINE,
              allreduce=rng.choice([AllReduceKind.RING, AllReduceKind.TREE]))
    n = job.gpus
    caps, left = [], n
    while left:
        c = rng.randint(1, min(left, 4))
        caps.append(c)
        left -= c
    counts = heavy_edge_counts(job, caps, seed=trial)
    assert [sum(x) for x in counts] == caps
    assert [sum(col) for col in zip(*counts)] == list(k)
    # concrete GPUs on a cluster whose servers have these free GPUs
    servers = [(m, list(range(10 * m, 10 * m + c))) for m, c in enumerate(caps)]
    pl = heavy_edge_placement(job, servers, seed=trial)
    assert sorted(pl.gpus) == sorted(g for _, gs in servers for g in gs)
    assert [len(x) for x in pl.stage_gpus] == list(k)
    assert pl == heavy_edge_placement(job, servers, seed=trial)


def test_heavy_edge_never_worse_than_contiguous_on_fig2_layouts(spec_bw):
    g, b_inter, b_intra = spec_bw
    job = fig2_job()
    cut_he = job_graph(job).cut_weight(
        [[job_graph(job).vertices.index(v) for v in p] for p in heavy_edge_assignment(job, [4, 1, 1])])
    assert cut_he == pytest.approx(4 * MB + 5 * MB)  # the four 1 MB stage-2/3 edges + stage-3 all-reduce
    a_he = asrpt_alpha_min_tilde(job, g, b_inter, b_intra, heavy_edge_mapper(0))
    a_cont = asrpt_alpha_min_tilde(job, g, b_inter, b_intra, contiguous_mapper)
    assert a_he <= a_cont + 1e-12


def test_mapper_matches_exhaustive_optimum_on_small_cases(spec_job, spec_bw):
    """The spec's test job on (2, 2): Heavy-Edge keeps each stage's all-reduce inside a server."""
    g, b_inter, b_intra = spec_bw
    counts = heavy_edge_counts(spec_job, [2, 2])
    assert sorted(map(tuple, counts)) == [(0, 2), (2, 0)]
    alpha = asrpt_iteration_time(spec_job, dict(enumerate(counts)), g, b_inter, b_intra)
    best = min(
        asrpt_iteration_time(spec_job, {0: list(x), 1: [2 - x[0], 2 - x[1]]}, g, b_inter, b_intra)
        for x in itertools.product(range(3), range(3)) if sum(x) == 2
    )
    assert alpha == pytest.approx(best)
    assert alpha == pytest.approx(0.055933, rel=1e-4)  # asrpt.md §3.1 row 2
