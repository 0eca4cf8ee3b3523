"""Ring embedding of a ring-all-reduce job onto a two-tier cluster (GADGET §IV-2, eqs. 7–9).

A job's ``w`` workers sit on one or more servers. On one server no link is used
(any logical topology works inside a server, GADGET Fig. 2a). On several servers
the used servers form **one directed cycle**: every used server sends exactly one
inter-server hop and receives exactly one (degree 2, eq. 9 restricted to hosting
servers), and each hop reserves the job's bandwidth ``b_i``
(bytes/s) on every link of its path (eq. 8). Workers of one server are
consecutive in the ring, servers of one rack are consecutive, so a multi-rack
ring crosses each used rack's up- and downlink exactly once — the fewest link
reservations any ring over those servers can make.

Link ids are those of :class:`raytestbed.core.cluster.Cluster`: ``("egress", m)``,
``("ingress", m)``, ``("rack_up", r)``, ``("rack_down", r)``.

Resources per worker: 1 GPU and ``mem_gb`` GB of host memory (multi-dimensional
node capacity, GADGET eqs. 4, 16, 18).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Hashable, Iterable, Mapping

import numpy as np

from raytestbed.core.cluster import Cluster

_TOL = 1e-9


@dataclass(frozen=True)
class RingEmbedding:
    """One job's workers on servers, in ring order.

    Attributes:
        job_id: the job.
        servers: ``(server, workers)`` pairs in ring order; servers distinct, workers >= 1.
        b_bps: bandwidth reserved on every link of every inter-server hop, bytes/s.
        mem_gb: host memory per worker, GB.
    """

    job_id: int
    servers: tuple[tuple[int, int], ...]
    b_bps: float = 0.0
    mem_gb: float = 0.0

    @property
    def workers(self) -> int:
        return sum(c for _, c in self.servers)

    @property
    def server_ids(self) -> tuple[int, ...]:
        return tuple(m for m, _ in self.servers)

    def counts(self) -> dict[int, int]:
        """Server -> workers (y_{is})."""
        return dict(self.servers)

    def hops(self) -> list[tuple[int, int]]:
        """Inter-server ring hops (src server, dst server); empty on one server."""
        ids = self.server_ids
        if len(ids) < 2:
            return []
        return [(ids[k], ids[(k + 1) % len(ids)]) for k in range(len(ids))]

    def link_use(self, cluster: Cluster) -> Counter:
        """Link id -> bytes/s this embedding reserves (b_i per hop crossing the link); do not modify."""
        memo = self.__dict__.get("_link_use")
        if memo is not None and memo[0] is cluster:
            return memo[1]
        use: Counter = Counter()
        for s, d in self.hops():
            for link in cluster.path(s, d):
                use[link] += self.b_bps
        object.__setattr__(self, "_link_use", (cluster, use))
        return use


def ring_order(servers: Iterable[int], cluster: Cluster) -> list[int]:
    """Servers ordered so that each rack's servers are consecutive (racks by id, servers by id)."""
    def key(m: int) -> tuple[int, int]:
        r = cluster.servers[m].rack
        return (-1 if r is None else r, m)

    return sorted(set(servers), key=key)


def make_embedding(job_id: int, counts: Mapping[int, int], cluster: Cluster, b_bps: float,
                   mem_gb: float = 0.0) -> RingEmbedding:
    """A ring over the servers of ``counts`` (server -> workers > 0) in rack-grouped order."""
    order = ring_order([m for m, c in counts.items() if c > 0], cluster)
    return RingEmbedding(job_id, tuple((m, int(counts[m])) for m in order), float(b_bps), float(mem_gb))


def check_ring(emb: RingEmbedding, cluster: Cluster) -> None:
    """Raise ``ValueError`` unless ``emb`` is one ring over its used servers (eq. 9).

    Checks: servers distinct and existing, worker counts >= 1; with >= 2 servers,
    every used server has exactly one outgoing and one incoming hop (degree 2),
    the hops form a single cycle through all used servers, and every hop's path
    starts at its source's egress and ends at its destination's ingress.
    """
    ids = emb.server_ids
    if not ids:
        raise ValueError(f"job {emb.job_id}: empty embedding")
    if len(set(ids)) != len(ids):
        raise ValueError(f"job {emb.job_id}: a server appears twice in the ring")
    for m, c in emb.servers:
        if not 0 <= m < cluster.num_servers:
            raise ValueError(f"job {emb.job_id}: server {m} does not exist")
        if c < 1:
            raise ValueError(f"job {emb.job_id}: server {m} has {c} workers")
    hops = emb.hops()
    if len(ids) == 1:
        if hops:
            raise ValueError(f"job {emb.job_id}: single-server job with hops")
        return
    out_deg = Counter(s for s, _ in hops)
    in_deg = Counter(d for _, d in hops)
    for m in ids:
        if out_deg[m] != 1 or in_deg[m] != 1:
            raise ValueError(f"job {emb.job_id}: server {m} has degree out={out_deg[m]} in={in_deg[m]}, not 2")
    nxt = dict(hops)
    seen, cur = set(), ids[0]
    while cur not in seen:
        seen.add(cur)
        cur = nxt[cur]
    if seen != set(ids):
        raise ValueError(f"job {emb.job_id}: hops form several cycles, not one ring")
    for s, d in hops:
        path = cluster.path(s, d)
        if not path or path[0] != ("egress", s) or path[-1] != ("ingress", d):
            raise ValueError(f"job {emb.job_id}: hop {s}->{d} has no valid path")


@dataclass
class Substrate:
    """Residual capacities of the substrate for one slot (GADGET's g^{u,r}_s and e^{u,v}_s).

    Attributes:
        cluster: the cluster.
        gpu: free GPUs per server.
        mem: free host memory per server, GB.
        links: link id -> residual bandwidth, bytes/s.
    """

    cluster: Cluster
    gpu: np.ndarray
    mem: np.ndarray
    links: dict[Hashable, float] = field(default_factory=dict)

    @classmethod
    def full(cls, cluster: Cluster, lost: Iterable[int] = ()) -> "Substrate":
        """All capacities free (lost servers have none)."""
        gpu = np.array([s.gpus for s in cluster.servers], dtype=np.int64)
        mem = np.array([s.memory_gb if s.memory_gb > 0 else np.inf for s in cluster.servers], dtype=float)
        for m in lost:
            gpu[m] = 0
            mem[m] = 0.0
        return cls(cluster, gpu, mem, dict(cluster.link_capacities()))

    def copy(self) -> "Substrate":
        return Substrate(self.cluster, self.gpu.copy(), self.mem.copy(), dict(self.links))

    def fits(self, emb: RingEmbedding) -> bool:
        """True if ``emb`` fits in the residual capacities."""
        for m, c in emb.servers:
            if c > self.gpu[m] or c * emb.mem_gb > self.mem[m] + _TOL:
                return False
        for link, bw in emb.link_use(self.cluster).items():
            if bw > self.links[link] * (1 + _TOL) + _TOL:
                return False
        return True

    def take(self, emb: RingEmbedding) -> None:
        """Reserve ``emb``'s resources (no check)."""
        for m, c in emb.servers:
            self.gpu[m] -= c
            self.mem[m] -= c * emb.mem_gb
        for link, bw in emb.link_use(self.cluster).items():
            self.links[link] -= bw

    def give(self, emb: RingEmbedding) -> None:
        """Return ``emb``'s resources."""
        for m, c in emb.servers:
            self.gpu[m] += c
            self.mem[m] += c * emb.mem_gb
        for link, bw in emb.link_use(self.cluster).items():
            self.links[link] += bw


def capacity_violations(embeddings: Iterable[RingEmbedding], substrate: Substrate) -> list[str]:
    """Every capacity (GPU, memory, link) that the embeddings together exceed; [] if none."""
    embs = list(embeddings)
    gpu: Counter = Counter()
    mem: Counter = Counter()
    links: Counter = Counter()
    for e in embs:
        for m, c in e.servers:
            gpu[m] += c
            mem[m] += c * e.mem_gb
        links.update(e.link_use(substrate.cluster))
    out = []
    for m, c in gpu.items():
        if c > substrate.gpu[m]:
            out.append(f"server {m}: {c} GPUs > {substrate.gpu[m]}")
        if mem[m] > substrate.mem[m] + 1e-6:
            out.append(f"server {m}: {mem[m]} GB > {substrate.mem[m]}")
    for link, bw in links.items():
        cap = substrate.links[link]
        if bw > cap * (1 + _TOL) + _TOL:
            out.append(f"link {link}: {bw} B/s > {cap}")
    return out


def validate_embeddings(embeddings: Iterable[RingEmbedding], substrate: Substrate) -> None:
    """Raise ``ValueError`` if any embedding is not one ring or together they exceed a capacity."""
    embs = list(embeddings)
    for e in embs:
        check_ring(e, substrate.cluster)
    bad = capacity_violations(embs, substrate)
    if bad:
        raise ValueError("capacity exceeded: " + "; ".join(bad[:5]))


def _per_server_cap(sub: Substrate, mem_gb: float) -> np.ndarray:
    cap = sub.gpu.astype(float).copy()
    if mem_gb > 0:
        cap = np.minimum(cap, np.floor(sub.mem / mem_gb + 1e-9))
    return np.maximum(cap, 0).astype(np.int64)


def greedy_ring(job_id: int, workers: int, b_bps: float, sub: Substrate, mem_gb: float = 0.0,
                min_workers: int | None = None) -> RingEmbedding | None:
    """The simple ring-forming placement of GADGET §VI-2 (also G-VNE's greedy fallback).

    1. One server that holds all ``workers`` (best fit: fewest free GPUs) — no link used.
    2. Else one rack: servers whose NIC has ``b_bps`` left both ways, most free GPUs first;
       the rack needing the fewest servers wins.
    3. Else several racks whose up/downlinks have ``b_bps`` left, most free GPUs first.

    ``min_workers`` (default ``workers``): if fewer than ``workers`` fit, the largest
    count >= ``min_workers`` that fits is placed. Returns None if nothing fits; the
    substrate is not changed.
    """
    c = sub.cluster
    lo = workers if min_workers is None else max(1, min_workers)
    cap = _per_server_cap(sub, mem_gb)
    for w in range(workers, lo - 1, -1):
        emb = _greedy_ring_exact(job_id, w, b_bps, sub, mem_gb, cap, c)
        if emb is not None:
            return emb
    return None


def _greedy_ring_exact(job_id, w, b_bps, sub, mem_gb, cap, c) -> RingEmbedding | None:
    fit = np.nonzero(cap >= w)[0]
    if fit.size:
        m = int(fit[np.argmin(cap[fit] * (c.num_servers + 1) + fit)])
        return RingEmbedding(job_id, ((m, w),), float(b_bps), float(mem_gb))
    if w < 2:
        return None
    nic_ok = [m for m in range(c.num_servers) if cap[m] > 0
              and sub.links[("egress", m)] >= b_bps * (1 - _TOL)
              and sub.links[("ingress", m)] >= b_bps * (1 - _TOL)]
    by_rack: dict = {}
    for m in nic_ok:
        by_rack.setdefault(c.servers[m].rack, []).append(m)
    best = None
    for r, ms in by_rack.items():
        ms = sorted(ms, key=lambda m: (-cap[m], m))
        if sum(int(cap[m]) for m in ms) < w:
            continue
        chosen = _take(ms, cap, w)
        if best is None or len(chosen) < len(best):
            best = chosen
    if best is not None and len(best) >= 2:
        return make_embedding(job_id, best, c, b_bps, mem_gb)
    if not c.racks:
        return None
    racks_ok = {r.rack_id for r in c.racks
                if sub.links[("rack_up", r.rack_id)] >= b_bps * (1 - _TOL)
                and sub.links[("rack_down", r.rack_id)] >= b_bps * (1 - _TOL)}
    ms = sorted((m for m in nic_ok if c.servers[m].rack in racks_ok), key=lambda m: (-cap[m], m))
    if sum(int(cap[m]) for m in ms) < w:
        return None
    chosen = _take(ms, cap, w)
    if len(chosen) < 2:
        return None
    emb = make_embedding(job_id, chosen, c, b_bps, mem_gb)
    return emb if sub.fits(emb) else None


def _take(ms: list[int], cap: np.ndarray, w: int) -> dict[int, int]:
    out, left = {}, w
    for m in ms:
        k = min(int(cap[m]), left)
        if k > 0:
            out[m] = k
            left -= k
        if left == 0:
            break
    return out
