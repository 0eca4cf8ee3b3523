"""The fabric's fluid model: transfers grouped into connections, progressed in emulated time.

No Ray, no asyncio: a pure model that the virtual clock (:mod:`raytestbed.emu.vclock`) drives.

* A **transfer** moves ``nbytes`` bytes from one emulated GPU to another.
* Transfers of one job and coflow between the same two servers form one
  **connection** (one TCP-like connection per server pair, as the simulator
  merges them in ``network/traffic.py``); a connection is one flow of the
  core :class:`~raytestbed.network.allocator.RateAllocator` (weighted max-min
  over the links of ``Cluster.path``), and its members share its rate
  equally (processor sharing).
* A transfer between two GPUs of one server crosses no link; its connection
  (per GPU pair) is capped at ``intra_bps`` (architecture.md: intra-server
  traffic is a per-flow cap).
* NIC sharing (``nic_share``): ``"fair"`` (default) shares each NIC by weighted
  max-min among the connections crossing it, so a lone flow gets the whole NIC;
  ``"reserved"`` gives every GPU its own B_inter/g of its server's NIC in each
  direction (A-SRPT §III-A's model, ``reserved_share``): an
  inter-server transfer also crosses its source GPU's ``("gpu_out", gpu)`` and
  its destination GPU's ``("gpu_in", gpu)`` link, each of capacity NIC / g, and
  connections are per GPU pair. The GPU links of a server add up to its NIC, so
  no GPU can borrow another's idle share.
* Rates are recomputed whenever a transfer starts or ends, a weight, rate
  override or link capacity changes (the allocator recomputes lazily).

:meth:`FluidNet.advance` moves the clock to a target time through every
completion in between, so completion times are exact in the model whatever
the delay of the caller's wake-up. A transfer's bytes left are evaluated from
its anchor (bytes left at the anchor time, rate since:
:func:`~raytestbed.core.flows.bytes_left`, the flow simulator's formula too);
the anchor moves only when its rate changed and time then passes (or the new
rate ends it at once), and a transfer ends at its anchor's
:func:`~raytestbed.core.flows.finish_time`, so both backends hand network
policies the same floats whatever instants each stops at.
Units: bytes, bytes/s, emulated seconds.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from raytestbed.core.cluster import Cluster
from raytestbed.core.flows import bytes_left, finish_time
from raytestbed.errors import PolicyError
from raytestbed.network.allocator import RateAllocator
from raytestbed.network.connections import connection_key

#: How NICs are shared (module docstring).
NIC_SHARES = ("fair", "reserved")

#: Bytes below which a transfer counts as delivered (float round-off).
_EPS_BYTES = 1e-6


@dataclass(eq=False)
class Transfer:
    """One transfer in the fluid model (times in emulated seconds, sizes in bytes)."""

    tid: int
    job_id: int
    coflow_id: Hashable | None
    src_gpu: int
    dst_gpu: int
    src_server: int
    dst_server: int
    nbytes: float
    start_s: float
    remaining: float = 0.0
    conn: tuple = ()
    finish_s: float | None = None
    token: Any = None  # the caller's completion handle (an asyncio future)
    coflow_bytes: float = 0.0  #: bytes of its whole coflow (``Send.coflow_bytes``)
    num: int = -1  #: its number among its job's flows (:meth:`FluidNet.add`; the flow id policies see)
    policy_rate: float | None = None  #: a network policy's rate for it, bytes/s (None: max-min share)
    a_t: float = 0.0  #: anchor time, emulated s (:meth:`FluidNet.add`, then when its rate changed)
    a_rem: float = 0.0  #: bytes left at the anchor time
    a_rate: float = 0.0  #: its rate since the anchor time, bytes/s
    fin: float = math.inf  #: when it ends at that rate (``finish_time`` of the anchor), emulated s

    def __post_init__(self) -> None:
        self.remaining = float(self.nbytes)


@dataclass(eq=False)
class _Conn:
    key: tuple
    job_id: int
    links: tuple
    cap: float
    members: dict[int, Transfer] = field(default_factory=dict)


class FluidNet:
    """Connections over a cluster's links, progressed in emulated time (seconds).

    Args:
        cluster: the emulated cluster (capacities in bytes/s).
        nic_share: ``"fair"`` or ``"reserved"`` (module docstring).
    """

    def __init__(self, cluster: Cluster, nic_share: str = "fair") -> None:
        if nic_share not in NIC_SHARES:
            raise ValueError(f"nic_share must be one of {', '.join(NIC_SHARES)}, got {nic_share!r}")
        self.cluster = cluster
        self.nic_share = nic_share
        self.base_caps = dict(cluster.link_capacities())
        if nic_share == "reserved":
            for s in cluster.servers:
                for g in cluster.gpus_of(s.server_id):
                    self.base_caps[("gpu_out", g)] = s.nic_egress_bps / s.gpus
                    self.base_caps[("gpu_in", g)] = s.nic_ingress_bps / s.gpus
        self.link_factor: dict[Hashable, float] = {}  # slow-down factors (> 1 = slower)
        self.intra_factor: dict[int, float] = {}  # per server
        self.alloc = RateAllocator(self.base_caps)
        self.t = 0.0  # emulated time of the last advance
        self.conns: dict[tuple, _Conn] = {}
        self.weights: dict[int, float] = {}
        self.overrides: dict[Hashable, float] = {}
        self.overcommitted = 0  # times policy-set rates exceeded a link's capacity
        self._rates: dict[tuple, float] | None = None
        #: every transfer in the model by job, in the order they joined (their ``num`` ascending)
        self.by_job: dict[int, dict[int, Transfer]] = {}
        self.by_tid: dict[int, Transfer] = {}
        self.version = 0  #: changes whenever a transfer joins or leaves
        self.policy_rated = 0  #: transfers with a policy rate

    # ------------------------------------------------------------ structure
    def connection(self, job_id: int, coflow_id: Hashable | None, src_gpu: int, dst_gpu: int) -> tuple:
        """Connection key of a transfer (:func:`raytestbed.network.connections.connection_key`)."""
        return connection_key(self.cluster, job_id, coflow_id, src_gpu, dst_gpu, self.nic_share == "reserved")

    def add(self, x: Transfer) -> None:
        """Start transfer ``x`` at the current model time. A new transfer gets the next number among its
        job's transfers in the model (0 when the job has none: the flow simulator numbers its rows so)."""
        mine = self.by_job.setdefault(x.job_id, {})
        if x.num < 0:
            x.num = next(reversed(mine.values())).num + 1 if mine else 0
        mine[x.tid] = x
        self.by_tid[x.tid] = x
        x.a_t, x.a_rem, x.a_rate, x.fin = self.t, x.remaining, 0.0, math.inf  # (rate 0 until rates are computed)
        self.version += 1
        if x.policy_rate is not None:
            self.policy_rated += 1
        key = self.connection(x.job_id, x.coflow_id, x.src_gpu, x.dst_gpu)
        x.conn = key
        conn = self.conns.get(key)
        if conn is None:
            if key[0] == "intra":
                links, cap = (), self.cluster.intra_bps / self.intra_factor.get(x.src_server, 1.0)
            else:
                links, cap = self.cluster.path(x.src_server, x.dst_server), math.inf
                if self.nic_share == "reserved":
                    links = (("gpu_out", x.src_gpu), *links, ("gpu_in", x.dst_gpu))
            conn = _Conn(key, x.job_id, links, cap)
            self.conns[key] = conn
            self.alloc.add_flow(key, links, weight=self.weights.get(x.job_id, 1.0), cap=cap)
        conn.members[x.tid] = x
        self._rates = None

    def remove(self, x: Transfer) -> None:
        """Take ``x`` out of the model (completed or failed)."""
        conn = self.conns.get(x.conn)
        if conn is None or x.tid not in conn.members:
            return
        del conn.members[x.tid]
        mine = self.by_job.get(x.job_id)
        if mine is not None:
            mine.pop(x.tid, None)
            if not mine:
                del self.by_job[x.job_id]
        self.by_tid.pop(x.tid, None)
        self.version += 1
        if x.policy_rate is not None:
            self.policy_rated -= 1
        if not conn.members:
            del self.conns[x.conn]
            self.alloc.remove_flow(x.conn)
        self._rates = None

    def transfers(self) -> list[Transfer]:
        return [x for c in self.conns.values() for x in c.members.values()]

    def __len__(self) -> int:
        return sum(len(c.members) for c in self.conns.values())

    # ------------------------------------------------------------ controls
    def set_weights(self, weights: dict[int, float]) -> None:
        """Per-job weights (> 0) of the weighted max-min allocation (decision SetFlowWeights)."""
        for job, w in weights.items():
            if not (isinstance(w, (int, float)) and math.isfinite(w) and w > 0):
                raise PolicyError(f"SetFlowWeights: weight of job {job} must be a finite number > 0, got {w!r}")
        for job, w in weights.items():
            self.weights[job] = float(w)
        changed = {c.key: self.weights[c.job_id] for c in self.conns.values() if c.job_id in weights}
        if changed:
            self.alloc.set_weights(changed)
        self._rates = None

    def set_rates(self, rates: dict) -> None:
        """Explicit rates (bytes/s, >= 0; None removes) that replace max-min for matching connections.

        Keys: a connection key as listed by ``flows()``; ``(job_id, src_server, dst_server)``
        for that job's connections between two servers; or ``job_id`` for each of the job's
        connections.  The most specific key wins.  Other connections share what is left
        of each link by weighted max-min (as the simulator's SetFlowRates).
        """
        for key, r in rates.items():
            if r is not None and not (isinstance(r, (int, float)) and math.isfinite(r) and r >= 0):
                raise PolicyError(f"SetFlowRates: rate of {key!r} must be a finite number >= 0 bytes/s, got {r!r}")
        for key, r in rates.items():
            if r is None:
                self.overrides.pop(key, None)
            else:
                self.overrides[key] = float(r)
        self._rates = None

    def set_transfer_rates(self, rates: list[tuple[Transfer, float]]) -> None:
        """A network policy's rates (bytes/s, >= 0) for single transfers (``SetFlowRates`` on the flow
        table, :mod:`raytestbed.core.flows`): each runs at its rate until it ends or gets another; the
        other members of its connection keep their part of the connection's max-min share (the flow
        simulator's rows: a member's share is 1 / members, whatever the others run at)."""
        for x, r in rates:
            if not (isinstance(r, (int, float)) and math.isfinite(r) and r >= 0):
                raise PolicyError(f"SetFlowRates: rate of flow {x.job_id}/{x.num} must be a finite number >= 0 "
                                  f"bytes/s, got {r!r}")
        for x, r in rates:
            if x.policy_rate is None:
                self.policy_rated += 1
            x.policy_rate = float(r)
        self._rates = None

    def set_link_factor(self, link: Hashable, factor: float) -> None:
        """Slow link ``link`` down: capacity = configured / factor (factor >= 1 slows, 1 restores)."""
        if not (math.isfinite(factor) and factor > 0):
            raise ValueError(f"slow_link: factor must be a finite number > 0, got {factor!r}")
        self.link_factor[link] = float(factor)
        self.alloc.set_capacity(link, self.base_caps[link] / factor)
        self._rates = None

    def set_intra_factor(self, server: int, factor: float) -> None:
        """Slow the intra-server bandwidth of ``server`` down by ``factor``."""
        if not (math.isfinite(factor) and factor > 0):
            raise ValueError(f"slow_link: factor must be a finite number > 0, got {factor!r}")
        self.intra_factor[server] = float(factor)
        # Existing connections keep their cap until they are re-created; update them now.
        for c in list(self.conns.values()):
            if c.key[0] == "intra" and self.cluster.server_of(c.key[3]) == server:
                c.cap = self.cluster.intra_bps / factor
                w = self.weights.get(c.job_id, 1.0)
                self.alloc.remove_flow(c.key)
                self.alloc.add_flow(c.key, (), weight=w, cap=c.cap)
        self._rates = None

    # ------------------------------------------------------------ rates
    def _override_for(self, c: _Conn) -> float | None:
        ov = self.overrides
        if not ov:
            return None
        if c.key in ov:
            return ov[c.key]
        if c.key[0] == "inter":
            k = (c.job_id, c.key[3], c.key[4])
            if k in ov:
                return ov[k]
        return ov.get(c.job_id)

    def conn_rates(self) -> dict[tuple, float]:
        """Rate (bytes/s) of every connection: of its members without a policy rate, together."""
        if self._rates is not None:
            return self._rates
        fixed = {k: r for k, r in ((c.key, self._override_for(c)) for c in self.conns.values()) if r is not None}
        if not fixed and not self.policy_rated:
            self._rates = self.alloc.rates()
            return self._rates
        # Policy-set rates for some connections or transfers; max-min over the residual capacity for the rest.
        residual = {l: self.alloc.capacity(l) for l in self.alloc.links()}
        for k, r in fixed.items():
            for link in self.conns[k].links:
                residual[link] -= r
        rest = []
        for c in self.conns.values():
            if c.key in fixed:
                continue
            if self.policy_rated:
                rated = [x.policy_rate for x in c.members.values() if x.policy_rate is not None]
                for link in c.links:
                    residual[link] -= sum(rated)
                free = len(c.members) - len(rated)
            else:
                free = len(c.members)
            if free:
                rest.append((c, free / len(c.members)))
        if any(left < -1e-9 * self.alloc.capacity(l) for l, left in residual.items()):
            self.overcommitted += 1
        tmp = RateAllocator({l: max(left, 1e-9 * self.alloc.capacity(l)) for l, left in residual.items()})
        for c, part in rest:  # (the members without a policy rate keep their 1 / members of the connection)
            tmp.add_flow(c.key, c.links, weight=self.weights.get(c.job_id, 1.0) * part, cap=c.cap * part)
        rates = {c.key: 0.0 for c in self.conns.values()}
        rates.update(fixed)
        if rest:
            rates.update(tmp.rates())
        self._rates = rates
        return rates

    def _member_rates(self, c: _Conn, rates: dict[tuple, float]) -> list[tuple[Transfer, float]]:
        """(transfer, rate) of every member of ``c``: its policy rate, else an equal part of the rest."""
        if not self.policy_rated or self._override_for(c) is not None:
            r = rates[c.key] / len(c.members)
            return [(x, r) for x in c.members.values()]
        free = sum(1 for x in c.members.values() if x.policy_rate is None)
        r = rates[c.key] / free if free else 0.0
        return [(x, r if x.policy_rate is None else x.policy_rate) for x in c.members.values()]

    def rate_of(self, x: Transfer) -> float:
        """Rate (bytes/s) of one transfer: its policy rate, or its part of its connection's rate."""
        c = self.conns[x.conn]
        return dict((m.tid, r) for m, r in self._member_rates(c, self.conn_rates()))[x.tid]

    def _per_transfer(self) -> list[tuple[Transfer, float]]:
        """(transfer, rate now) of every transfer in the model."""
        rates = self.conn_rates()
        return [xr for c in self.conns.values() for xr in self._member_rates(c, rates)]

    @staticmethod
    def _finish(per: list[tuple[Transfer, float]], now: float) -> tuple[float, bool]:
        """(earliest finish time, whether a rate changed since its transfer's anchor): a transfer whose
        rate changed finishes as if anchored at ``now`` (emulated s)."""
        best, changed = math.inf, False
        for x, r in per:
            if r != x.a_rate:
                changed = True
                f = finish_time(x.remaining, r, now)
            else:
                f = x.fin
            if f < best:
                best = f
        return best, changed

    def next_finish(self) -> float:
        """Model time (emulated s) of the next completion; inf when none can finish."""
        return self._finish(self._per_transfer(), self.t)[0]

    def _move(self, per: list[tuple[Transfer, float]], t: float) -> None:
        """Anchor the transfers whose rate changed at the model time, then bring every transfer to ``t``."""
        for x, r in per:
            if r != x.a_rate:
                x.a_t, x.a_rem, x.a_rate = self.t, x.remaining, r
                x.fin = finish_time(x.remaining, r, self.t)
        for x, _ in per:
            x.remaining = bytes_left(x.a_rem, x.a_rate, x.a_t, t)
        self.t = t

    # ------------------------------------------------------------ time
    def advance(self, t_target: float) -> list[Transfer]:
        """Move the model clock to ``t_target`` (emulated s); return transfers completed on the way.

        Steps from completion to completion (the earliest anchored finish time), recomputing rates
        after each, so every ``finish_s`` is the exact fluid-model completion time.
        """
        done: list[Transfer] = []
        while self.conns:
            per = self._per_transfer()
            t_fin, changed = self._finish(per, self.t)
            if t_fin > t_target:
                if t_target > self.t:
                    self._move(per, t_target)
                break
            if t_fin > self.t or changed:  # (a new rate that ends a transfer at once: anchored now)
                self._move(per, max(t_fin, self.t))
            for x, _ in per:
                if x.remaining <= max(_EPS_BYTES, 1e-12 * x.nbytes):
                    x.remaining = 0.0
                    x.finish_s = self.t
                    self.remove(x)
                    done.append(x)
        if t_target > self.t:
            self.t = t_target
        return done
