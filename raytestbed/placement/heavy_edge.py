"""Heavy-Edge GPU mapping (A-SRPT §IV-B).

A job is a graph Omega = (V, E): one vertex per stage replica (s, r), edges weighted
by the bytes the two replicas exchange per iteration:

* inter-stage: every replica of stage s-1 with every replica of stage s, weight
  2 d^out_{s-1} / k_s = 2 A_{s-1} / (k_{s-1} k_s) bytes (A = activation bytes
  crossing the boundary, ``StageProfile.out_bytes``);
* ring all-reduce (RAR) among the k_s >= 2 replicas of stage s: ring edges
  (r, r+1 mod k), weight 2 (k-1) h / k; for k = 2 one edge of weight h;
* tree all-reduce (TAR): the edges of NCCL's double binary tree, weight
  (k-1) h / k each, a pair in both trees gets the summed weight.

The greedy procedure partitions the graph into the chosen servers' free-GPU counts,
largest server first (ties by position), with both special cases of the paper:

1. the unassigned vertices exactly fill the server: all of them go there;
2. a one-GPU server takes the unassigned vertex with the least total incident
   weight in the full graph (ties: smallest (s, r));

otherwise ``node_set`` grows by the heaviest edge joining it to an unassigned
vertex (seeded by the heaviest edge inside the unassigned set); with no
connecting edge a uniformly random unassigned vertex is added (seeded RNG).
Edge ties: larger weight, then smallest new vertex (s, r).

Determinism: the RNG is seeded from ``seed`` and the server capacities, not from
the job id, so the same (job configuration, capacities, seed) always gives the
same mapping and results can be cached across jobs of one configuration
(:func:`heavy_edge_counts` caches them).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from raytestbed.core.job import AllReduceKind, Job, Stage
from raytestbed.core.placement import Placement
from raytestbed.core.timing import ring_allreduce_bytes

Vertex = tuple[int, int]  #: (stage s, replica r), both 0-based


@dataclass(frozen=True)
class JobGraph:
    """The communication graph of one job configuration.

    Attributes:
        vertices: (stage, replica) pairs in (s, r) order; vertex index = position.
        weights: ``weights[u][v]`` bytes per iteration between vertices u and v
            (symmetric, 0 = no edge).
    """

    vertices: tuple[Vertex, ...]
    weights: tuple[tuple[float, ...], ...]

    @property
    def n(self) -> int:
        return len(self.vertices)

    def edges(self) -> list[tuple[int, int, float]]:
        """(u, v, weight) with u < v for every edge."""
        return [(u, v, self.weights[u][v]) for u in range(self.n) for v in range(u + 1, self.n)
                if self.weights[u][v] > 0]

    def cut_weight(self, parts: Sequence[Sequence[int]]) -> float:
        """Total weight of edges whose endpoints lie in different parts (vertex indices)."""
        where = {v: i for i, p in enumerate(parts) for v in p}
        return sum(w for u, v, w in self.edges() if where[u] != where[v])

    def to_networkx(self):
        """The graph as a ``networkx.Graph`` with (s, r) nodes and ``weight`` attributes."""
        import networkx as nx

        g = nx.Graph()
        g.add_nodes_from(self.vertices)
        for u, v, w in self.edges():
            g.add_edge(self.vertices[u], self.vertices[v], weight=w)
        return g


def nccl_double_binary_tree(k: int) -> list[tuple[int, int, int]]:
    """Edges (parent, child, tree) of NCCL's double binary tree over ranks 0..k-1.

    Tree 0: for r >= 1 with lowest set bit b, parent = (r ^ b) | (b << 1), or r ^ b
    if that is >= k (NCCL ``ncclGetBtree``). Tree 1: tree 0 shifted by one rank
    (r -> (r+1) mod k) when k is odd, mirrored (r -> k-1-r) when k is even
    (NCCL ``ncclGetDtree``).
    """
    tree0 = []
    for r in range(1, k):
        b = r & -r
        up = (r ^ b) | (b << 1)
        if up >= k:
            up = r ^ b
        tree0.append((up, r))
    if k % 2 == 1:
        tree1 = [((p + 1) % k, (c + 1) % k) for p, c in tree0]
    else:
        tree1 = [(k - 1 - p, k - 1 - c) for p, c in tree0]
    return [(p, c, 0) for p, c in tree0] + [(p, c, 1) for p, c in tree1]


@lru_cache(maxsize=4096)
def _graph(stages: tuple[Stage, ...], allreduce: AllReduceKind) -> JobGraph:
    verts = tuple((s, r) for s, st in enumerate(stages) for r in range(st.replicas))
    index = {v: i for i, v in enumerate(verts)}
    n = len(verts)
    w = [[0.0] * n for _ in range(n)]

    def add(a: Vertex, b: Vertex, x: float) -> None:
        u, v = index[a], index[b]
        w[u][v] += x
        w[v][u] += x

    for s in range(1, len(stages)):
        kp, ks = stages[s - 1].replicas, stages[s].replicas
        x = 2.0 * stages[s - 1].profile.out_bytes / (kp * ks)  # 2 d^out_{s-1} / k_s
        if x > 0:
            for a in range(kp):
                for b in range(ks):
                    add((s - 1, a), (s, b), x)
    for s, st in enumerate(stages):
        k, h = st.replicas, st.profile.param_bytes
        if k < 2 or h <= 0:
            continue
        if allreduce is AllReduceKind.RING:
            x = ring_allreduce_bytes(h, k)
            pairs = {tuple(sorted((r, (r + 1) % k))) for r in range(k)}  # k = 2: one edge
            for a, b in sorted(pairs):
                add((s, a), (s, b), x)
        else:
            x = (k - 1) * h / k
            for a, b, _ in nccl_double_binary_tree(k):
                add((s, a), (s, b), x)  # a pair in both trees: summed
    return JobGraph(verts, tuple(tuple(row) for row in w))


def job_graph(job: Job) -> JobGraph:
    """The communication graph Omega of ``job`` (cached per configuration)."""
    return _graph(job.stages, job.allreduce)


def _rng(seed: int, caps: tuple[int, ...]) -> random.Random:
    return random.Random(hash((int(seed),) + caps) & 0xFFFFFFFF)


def heavy_edge_partition(graph: JobGraph, capacities: Sequence[int], seed: int = 0) -> list[list[int]]:
    """Vertex indices per server (in the order of ``capacities``), by the Heavy-Edge greedy.

    Args:
        graph: the job graph.
        capacities: free GPUs g_m of each chosen server; must sum to the vertex count.
        seed: seeds the random fallback (with the capacities; see module doc).
    """
    caps = tuple(int(c) for c in capacities)
    n = graph.n
    if sum(caps) != n or any(c < 0 for c in caps):
        raise ValueError(f"capacities {list(caps)} must be >= 0 and sum to the job's {n} GPUs")
    w = graph.weights
    rng: random.Random | None = None
    order = sorted(range(len(caps)), key=lambda i: (-caps[i], i))
    parts: list[list[int]] = [[] for _ in caps]
    unassigned = list(range(n))  # kept in index order
    total = [sum(row) for row in w]
    for mi in order:
        c = caps[mi]
        if c == 0:
            continue
        if len(unassigned) == c:  # special case 1
            parts[mi] = list(unassigned)
            unassigned = []
            break
        if c == 1:  # special case 2: least total incident weight, ties by (s, r)
            v = min(unassigned, key=lambda u: (total[u], u))
            parts[mi] = [v]
            unassigned.remove(v)
            continue
        node_set: list[int] = []
        inside = [False] * n
        best = [0.0] * n  # heaviest edge from each vertex into node_set
        while len(node_set) < c:
            rest = [u for u in unassigned if not inside[u]]
            if not node_set:
                pick, bw = None, 0.0
                for ai, a in enumerate(rest):
                    row = w[a]
                    for b in rest[ai + 1:]:
                        if row[b] > bw:
                            pick, bw = (a, b), row[b]
                new = list(pick) if pick is not None else None
            else:
                cand, bw = None, 0.0
                for u in rest:
                    if best[u] > bw:
                        cand, bw = u, best[u]
                new = [cand] if cand is not None else None
            if new is None:  # no connecting edge: a uniformly random unassigned vertex
                if rng is None:
                    rng = _rng(seed, caps)
                new = [rest[rng.randrange(len(rest))]]
            for u in new:
                inside[u] = True
                node_set.append(u)
                row = w[u]
                for v in rest:
                    if row[v] > best[v]:
                        best[v] = row[v]
        parts[mi] = sorted(node_set)
        unassigned = [u for u in unassigned if not inside[u]]
    return parts


@lru_cache(maxsize=65536)
def _counts(stages: tuple[Stage, ...], allreduce: AllReduceKind, caps: tuple[int, ...], seed: int):
    graph = _graph(stages, allreduce)
    parts = heavy_edge_partition(graph, caps, seed)
    nst = len(stages)
    out = []
    for p in parts:
        x = [0] * nst
        for v in p:
            x[graph.vertices[v][0]] += 1
        out.append(tuple(x))
    return tuple(out), tuple(tuple(p) for p in parts)


def heavy_edge_counts(job: Job, capacities: Sequence[int], seed: int = 0) -> list[list[int]]:
    """Heavy-Edge as a core :data:`raytestbed.core.timing.Mapper`: per server, x_s for every stage.

    Servers are returned in the order of ``capacities``. Cached per (stages,
    all-reduce kind, capacities, seed).
    """
    counts, _ = _counts(job.stages, job.allreduce, tuple(int(c) for c in capacities), int(seed))
    return [list(x) for x in counts]


def heavy_edge_mapper(seed: int = 0):
    """A :data:`~raytestbed.core.timing.Mapper` running Heavy-Edge with a fixed seed."""

    def mapper(job: Job, capacities: Sequence[int]) -> list[list[int]]:
        return heavy_edge_counts(job, capacities, seed)

    mapper.__name__ = f"heavy_edge_mapper_seed{seed}"
    return mapper


def heavy_edge_assignment(job: Job, capacities: Sequence[int], seed: int = 0) -> list[list[Vertex]]:
    """Heavy-Edge: the (stage, replica) vertices each server gets, servers in ``capacities`` order."""
    _, parts = _counts(job.stages, job.allreduce, tuple(int(c) for c in capacities), int(seed))
    verts = job_graph(job).vertices
    return [[verts[v] for v in p] for p in parts]


def heavy_edge_placement(
    job: Job, servers_gpus: Sequence[tuple[int, Sequence[int]]], seed: int = 0,
    ps_servers: Sequence[int] = (),
) -> Placement:
    """Map ``job``'s replicas onto concrete GPUs with Heavy-Edge.

    Args:
        servers_gpus: (server id, GPU ids to use there) per chosen server; the GPU
            counts are the capacities g_m and must sum to ``job.gpus``.
        seed: seeds the random fallback.
        ps_servers: PS servers of a parameter-server job (passed through).

    Replica (s, r) keeps its identity: a server's vertices, in (s, r) order, take
    that server's GPUs in the given order.
    """
    if len(job.stages) == 1 and job.stages[0].replicas == 1:  # one GPU: nothing to map (the most common job)
        given = [g for _, gpus in servers_gpus for g in gpus]
        if len(given) == 1:
            return Placement(((int(given[0]),),), tuple(ps_servers))
    caps = [len(g) for _, g in servers_gpus]
    assign = heavy_edge_assignment(job, caps, seed)
    stage_gpus: list[list[int]] = [[-1] * st.replicas for st in job.stages]
    for (_, gpus), verts in zip(servers_gpus, assign):
        for (s, r), gpu in zip(verts, gpus):
            stage_gpus[s][r] = int(gpu)
    return Placement(tuple(tuple(x) for x in stage_gpus), tuple(ps_servers))
