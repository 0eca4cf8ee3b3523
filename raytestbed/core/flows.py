"""The active flows as arrays: what network policies read (the array interface) and how they answer.

A network policy reads ``view.flows()``, a :class:`Flows` table of every flow of every active
coflow (coflows ordered by job arrival, then coflow id; flows in coflow order): source and
destination server, bytes left and total, the coflow each flow belongs to and the flow-to-link
incidence (:class:`LinkIndex` numbering). A backend that keeps its flows in arrays (the flow
simulator) hands out its own table; otherwise :class:`FlowTable` reads ``view.coflows``. The
policy answers with ``SetFlowRates(FlowRates(flows, rates))``: one rate (bytes/s) per row of the
table, a read-only mapping flow id -> rate for backends that want one (the emulator), applied as
an array by the simulator. The attained service of a job is ``view.running[j].bytes_sent``
(also in :attr:`Flows.job_sent`, per coflow).

Units: bytes, bytes/s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from raytestbed.core.cluster import Cluster

#: remaining bytes below this are rounded up, so a flow that is (numerically) done
#: still gets a positive rate and completes at once
MIN_BYTES = 1.0


def finish_time(rem0: float, rate: float, t0: float) -> float:
    """When (s) a flow that had ``rem0`` bytes left at its anchor time ``t0`` (s) ends at ``rate``
    (bytes/s): ``t0 + rem0 / rate``; inf at rate 0."""
    return t0 + rem0 / rate if rate > 0.0 else math.inf


def bytes_left(rem0: float, rate: float, t0: float, t: float) -> float:
    """Bytes left at time ``t`` (s) of a flow anchored at ``t0`` (s) with ``rem0`` bytes left, running
    at ``rate`` (bytes/s) since: ``rem0 - rate x (t - t0)``, and 0 from :func:`finish_time` on.

    Both backends (the flow simulator's rows, the emulator's fluid model) evaluate a flow's bytes with
    this one formula from its anchor, and move the anchor (to the bytes left at that time) only when
    the flow's rate changes and time then passes -- not at every instant they happen to stop at -- so
    the bytes left and sent that network policies read are the same floats on both, whatever other
    events each backend steps through. Plain arithmetic: the simulator compiles it (numba)."""
    if not rate > 0.0:
        return rem0
    if t >= t0 + rem0 / rate:
        return 0.0
    left = rem0 - rate * (t - t0)
    return left if left > 0.0 else 0.0


class LinkIndex:
    """Link numbering for one cluster: egress m -> m, ingress m -> N+m, rack up/down after."""

    def __init__(self, cluster: Cluster) -> None:
        n = cluster.num_servers
        self.n_servers = n
        self.egress = np.array([s.nic_egress_bps for s in cluster.servers], dtype=float)
        self.ingress = np.array([s.nic_ingress_bps for s in cluster.servers], dtype=float)
        racks = cluster.racks
        self.rack = np.array([-1 if s.rack is None else s.rack for s in cluster.servers], dtype=np.intp)
        up = np.array([r.uplink_bps for r in racks], dtype=float)
        down = np.array([r.downlink_bps for r in racks], dtype=float)
        self.n_racks = len(racks)
        self.capacity = np.concatenate([self.egress, self.ingress, up, down])
        self.intra_bps = float(cluster.intra_bps)

    def incidences(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(flow index, link index) pairs, grouped by flow, for flows ``src -> dst`` (intra flows: none)."""
        n = self.n_servers
        f = np.arange(src.size, dtype=np.intp)
        net = src != dst
        if not self.n_racks:  # flat cluster: (egress src, ingress dst) per fabric flow, no sort needed
            fn = f[net]
            return np.repeat(fn, 2), np.column_stack((src[net], n + dst[net])).ravel()
        fl = [f[net], f[net]]
        li = [src[net], n + dst[net]]
        if self.n_racks:
            rs, rd = self.rack[src], self.rack[dst]
            cross = net & (rs >= 0) & (rd >= 0) & (rs != rd)
            fl += [f[cross], f[cross]]
            li += [2 * n + rs[cross], 2 * n + self.n_racks + rd[cross]]
        inc_flow = np.concatenate(fl)
        inc_link = np.concatenate(li)
        order = np.argsort(inc_flow, kind="stable")
        return inc_flow[order], inc_link[order]


@dataclass
class Flows:
    """The flows of the active coflows, coflow by coflow (arrays share the flow index).

    ``key``: the backend's handle of each flow (the simulator's flow serial numbers; None from
    :class:`FlowTable`), with ``owner`` and ``version`` saying whose table it is and of when."""

    flow_ids: Sequence[tuple]
    coflow_ids: list[tuple]
    coflow_job: list[int]  #: job id of each coflow
    cf: np.ndarray  #: coflow index of each flow
    src: np.ndarray
    dst: np.ndarray
    remaining: np.ndarray  #: bytes left, at least MIN_BYTES
    inc_flow: np.ndarray
    inc_link: np.ndarray
    total: np.ndarray  #: bytes of each flow when its coflow started
    key: np.ndarray | None = None
    owner: object = None
    version: int = -1
    job_sent: np.ndarray | None = field(default=None, repr=False)  #: bytes sent by each coflow's job

    def __getstate__(self) -> dict:
        """Pickled (a decision sent to another process) without ``owner``: the backend's whole flow model
        would travel with it, and it is only its own backend's to read."""
        return {**self.__dict__, "owner": None}

    @property
    def net(self) -> np.ndarray:
        """True for flows that cross the fabric (source and destination servers differ)."""
        return self.src != self.dst

    def signature(self) -> tuple:
        """(coflow id, flow count) of every coflow: changes when a coflow starts, ends or loses a flow."""
        counts = np.bincount(self.cf, minlength=self.n_coflows).tolist()
        return tuple(zip(self.coflow_ids, counts))

    @property
    def n_coflows(self) -> int:
        return len(self.coflow_ids)

    def subset(self, rows: np.ndarray) -> "Flows":
        """The flows at ``rows`` (ascending indices) as a table of their own: their coflows renumbered in
        order, each flow's links and the backend's ``key`` kept (``owner`` dropped: a backend applies
        rates for it by key, as for another table's)."""
        rows = np.asarray(rows, dtype=np.intp)
        kept, cf = np.unique(self.cf[rows], return_inverse=True)
        pos = np.full(len(self.flow_ids), -1, dtype=np.intp)
        pos[rows] = np.arange(rows.size)
        on = pos[self.inc_flow] >= 0
        cfs = kept.tolist()
        ids = self.flow_ids
        ids = ids.take(rows) if isinstance(ids, LazyFlowIds) else [ids[i] for i in rows.tolist()]
        return Flows(ids, [self.coflow_ids[c] for c in cfs],
                     [self.coflow_job[c] for c in cfs], cf.astype(np.intp), self.src[rows], self.dst[rows],
                     self.remaining[rows], pos[self.inc_flow[on]], self.inc_link[on], self.total[rows],
                     key=None if self.key is None else self.key[rows],
                     job_sent=None if self.job_sent is None else self.job_sent[kept])


class FlowTable:
    """Reads the active coflows of a view into :class:`Flows`, caching each coflow's static arrays.

    ``fast`` (default): one pass over all flows for the remaining bytes and one concatenation per
    array instead of per-coflow array building; same :class:`Flows` as the reference reader
    (``fast=False``), element for element."""

    def __init__(self, fast: bool = True) -> None:
        self.fast = bool(fast)
        self._links: LinkIndex | None = None
        self._cluster: Cluster | None = None
        self._static: dict[tuple, tuple[int, list[tuple], np.ndarray, np.ndarray]] = {}

    def links(self, cluster: Cluster) -> LinkIndex:
        if self._cluster is not cluster:
            self._cluster = cluster
            self._links = LinkIndex(cluster)
            self._static.clear()
        return self._links  # type: ignore[return-value]

    def read(self, view, coflow_ids: list[tuple] | None = None) -> Flows:
        """The flows of ``coflow_ids`` (default: every active coflow, by job arrival, job id)."""
        links = self.links(view.cluster)
        active = view.coflows
        if coflow_ids is None:
            running = view.running
            coflow_ids = sorted(active, key=lambda c: (running[active[c].job_id].job.arrival_s, c))
        running = view.running
        if self.fast:
            out = self._read_fast(active, list(coflow_ids), links)
            out.job_sent = np.array([running[j].bytes_sent for j in out.coflow_job], dtype=float)
            return out
        fids: list[tuple] = []
        cfs, srcs, dsts, rems, tots = [], [], [], [], []
        jobs = []
        live = set()
        for k, cid in enumerate(coflow_ids):
            info = active[cid]
            jobs.append(info.job_id)
            n = len(info.flows)
            hit = self._static_of(cid, info)
            live.add(cid)
            fids.extend(hit[1])
            srcs.append(hit[2])
            dsts.append(hit[3])
            cfs.append(np.full(n, k, dtype=np.intp))
            rems.append(np.fromiter((f.remaining_bytes for f in info.flows), dtype=float, count=n))
            tots.append(np.fromiter((f.total_bytes for f in info.flows), dtype=float, count=n))
        if len(self._static) > 4 * max(1, len(live)) + 64:
            self._static = {c: v for c, v in self._static.items() if c in live}
        cat = (lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dtype=dt))
        src, dst = cat(srcs, np.intp), cat(dsts, np.intp)
        inc_flow, inc_link = links.incidences(src, dst)
        return Flows(fids, list(coflow_ids), jobs, cat(cfs, np.intp), src, dst,
                     np.maximum(cat(rems, float), MIN_BYTES), inc_flow, inc_link, cat(tots, float),
                     job_sent=np.array([running[j].bytes_sent for j in jobs], dtype=float))

    def _static_of(self, cid, info) -> tuple:
        """Cached (flow count, flow ids, src array, dst array) of coflow ``cid``; rebuilt when its flows changed."""
        n = len(info.flows)
        hit = self._static.get(cid)
        if hit is None or hit[0] != n:
            src = np.fromiter((f.src for f in info.flows), dtype=np.intp, count=n)
            dst = np.fromiter((f.dst for f in info.flows), dtype=np.intp, count=n)
            hit = (n, [f.flow_id for f in info.flows], src, dst)
            self._static[cid] = hit
        return hit

    def _read_fast(self, active, coflow_ids: list[tuple], links: LinkIndex) -> Flows:
        infos = [active[c] for c in coflow_ids]
        statics = [self._static_of(cid, info) for cid, info in zip(coflow_ids, infos)]
        if len(self._static) > 4 * max(1, len(coflow_ids)) + 64:
            live = set(coflow_ids)
            self._static = {c: v for c, v in self._static.items() if c in live}
        counts = np.fromiter((h[0] for h in statics), dtype=np.intp, count=len(statics))
        total = int(counts.sum())
        rem = np.fromiter([f.remaining_bytes for i in infos for f in i.flows], dtype=float, count=total)
        tot = np.fromiter([f.total_bytes for i in infos for f in i.flows], dtype=float, count=total)
        if statics:
            src = np.concatenate([h[2] for h in statics])
            dst = np.concatenate([h[3] for h in statics])
        else:
            src = dst = np.zeros(0, dtype=np.intp)
        cf = np.repeat(np.arange(len(statics), dtype=np.intp), counts)
        fids = list(chain.from_iterable(h[1] for h in statics))
        inc_flow, inc_link = links.incidences(src, dst)
        return Flows(fids, coflow_ids, [i.job_id for i in infos], cf, src, dst,
                     np.maximum(rem, MIN_BYTES), inc_flow, inc_link, tot)


class LazyFlowIds(Sequence):
    """Flow ids ``(job, cycle, coflow index, flow number)`` built from arrays only when asked for."""

    def __init__(self, job: np.ndarray, cycle: np.ndarray, idx: np.ndarray, num: np.ndarray) -> None:
        self._cols = (job, cycle, idx, num)
        self._ids: list[tuple] | None = None

    def _all(self) -> list[tuple]:
        if self._ids is None:
            self._ids = list(zip(*(c.tolist() for c in self._cols)))
        return self._ids

    def __len__(self) -> int:
        return int(self._cols[0].size)

    def __getitem__(self, i):
        return self._all()[i]

    def __iter__(self) -> Iterator[tuple]:
        return iter(self._all())

    def take(self, rows: np.ndarray) -> "LazyFlowIds":
        """The ids at ``rows``, still unbuilt."""
        return LazyFlowIds(*(c[rows] for c in self._cols))


class FlowRates(Mapping):
    """A policy's rates (bytes/s) for the rows of one :class:`Flows` table.

    The simulator applies ``rates`` as an array (by ``flows.key``); to everyone else it is a
    read-only mapping flow id -> rate (built on first use)."""

    def __init__(self, flows: Flows, rates: np.ndarray) -> None:
        rates = np.asarray(rates, dtype=float)
        if rates.shape != (len(flows.flow_ids),):
            raise ValueError(f"{rates.shape[0] if rates.ndim else 0} rates for {len(flows.flow_ids)} flows")
        self.flows = flows
        self.rates = rates
        self._map: dict | None = None

    def _dict(self) -> dict:
        if self._map is None:
            self._map = dict(zip(self.flows.flow_ids, self.rates.tolist()))
        return self._map

    def __getitem__(self, fid):
        return self._dict()[fid]

    def __iter__(self):
        return iter(self.flows.flow_ids)

    def __len__(self) -> int:
        return int(self.rates.size)

    def first_bad(self) -> int | None:
        """Row of the first rate that is not a number >= 0 (None if all are)."""
        bad = ~(self.rates >= 0)
        return int(np.argmax(bad)) if bad.any() else None


#: the type of ``ClusterState.flow_arrays``: the backend's own table, or None
FlowArrays = Callable[[], Flows]
