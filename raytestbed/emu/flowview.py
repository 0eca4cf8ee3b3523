"""The fluid model's transfers as network policies see them: the flow simulator's table, on the virtual clock.

A network policy reads ``view.flows()`` (:mod:`raytestbed.core.flows`) and answers with
``SetFlowRates``. On the emulator the flows are the transfers in the fluid model
(:class:`~raytestbed.emu.fluid.FluidNet`); :class:`FlowView` lays them out exactly as the flow
simulator lays out its rows (:mod:`raytestbed.sim.flownet`, worker-by-worker runs of
:mod:`raytestbed.sim.pipeline_workers`), so one policy object gets the same table on both backends:

* one coflow per job with transfers in flight, ``(job, run version, 0)`` (run version 1, 3, 5, ...
  for the job's first, second, third run), jobs by arrival, then id;
* one row per transfer in flight, in the order they started; flow id ``(job, run version, 0, n)``,
  n the transfer's number (:meth:`FluidNet.add`: the next after the job's last transfer in flight,
  0 when it has none); source and destination server, bytes left (as of the clock's now) and total;
* each job's bytes sent in its current run (:meth:`FlowView.sent`): the bytes its transfers through
  the fluid model have moved so far, those still in flight included.

Same-GPU and empty transfers never enter the fluid model and are not flows (as in the simulator).
``SetFlowRates`` on such a table sets each transfer's rate (:meth:`FluidNet.set_transfer_rates`).
Units: bytes, bytes/s, emulated seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from raytestbed.core.flows import MIN_BYTES, FlowRates, Flows, LinkIndex
from raytestbed.core.job import Job
from raytestbed.core.state import CoflowInfo, FlowInfo
from raytestbed.emu.fluid import FluidNet, Transfer
from raytestbed.errors import PolicyError


class FlowView:
    """The flow table of one emulated trial (module docstring).

    Args:
        net: the clock's fluid model.
        jobs: every job of the trial (their arrival order fixes the order of coflows).
        fabric_bytes: completed bytes per job of transfers that went through ``net`` (the clock's).
    """

    def __init__(self, net: FluidNet, jobs: Sequence[Job], fabric_bytes: Mapping[int, float]) -> None:
        self.net = net
        order = sorted(jobs, key=lambda j: (j.arrival_s, j.job_id))
        self.rank_of = {j.job_id: r for r, j in enumerate(order)}
        self.links = LinkIndex(net.cluster)
        self.fabric_bytes = fabric_bytes
        self.version: dict[int, int] = {}  #: job -> its run version (the simulator's: 1, 3, 5, ...)
        self._offset: dict[int, float] = {}  #: job -> fabric bytes before its current run
        self._opened: dict[int, float] = {}  #: job -> when its coflow of the current run was first seen
        self._table: tuple | None = None

    # ------------------------------------------------------------------ runs
    def run_started(self, jid: int) -> None:
        """Job ``jid`` starts a run: a new coflow id, its bytes sent count from 0."""
        self.version[jid] = self.version.get(jid, -1) + 2
        self._offset[jid] = float(self.fabric_bytes.get(jid, 0.0))
        self._opened.pop(jid, None)

    def sent(self, jid: int) -> float:
        """Bytes job ``jid`` has moved through the fabric in its current run, in-flight transfers included."""
        moving = self.net.by_job.get(jid)
        done = float(self.fabric_bytes.get(jid, 0.0)) - self._offset.get(jid, 0.0)
        if not moving:
            return done
        return done + sum(x.nbytes - x.remaining for x in moving.values())

    # ------------------------------------------------------------------ the table
    def _rows(self) -> tuple[list[int], list[Transfer]]:
        jobs = sorted(self.net.by_job, key=lambda j: (self.rank_of.get(j, len(self.rank_of)), j))
        return jobs, [x for j in jobs for x in self.net.by_job[j].values()]

    def flows(self, job_sent: Mapping[int, float]) -> Flows:
        """Every transfer in flight as a :class:`~raytestbed.core.flows.Flows` table, bytes left as of the
        model's time (cached until a transfer joins or leaves or time moves)."""
        net = self.net
        stamp = (net.version, net.t)
        if self._table is not None and self._table[0] == stamp:
            return self._table[1]
        jobs, rows = self._rows()
        ver = self.version
        counts = [len(net.by_job[j]) for j in jobs]
        src = np.fromiter((x.src_server for x in rows), dtype=np.intp, count=len(rows))
        dst = np.fromiter((x.dst_server for x in rows), dtype=np.intp, count=len(rows))
        inc_flow, inc_link = self.links.incidences(src, dst)
        out = Flows(
            flow_ids=[(x.job_id, ver.get(x.job_id, 1), 0, x.num) for x in rows],
            coflow_ids=[(j, ver.get(j, 1), 0) for j in jobs],
            coflow_job=list(jobs),
            cf=np.repeat(np.arange(len(jobs), dtype=np.intp), counts),
            src=src, dst=dst,
            remaining=np.maximum(np.fromiter((x.remaining for x in rows), dtype=float, count=len(rows)), MIN_BYTES),
            inc_flow=inc_flow, inc_link=inc_link,
            total=np.fromiter((x.nbytes for x in rows), dtype=float, count=len(rows)),
            key=np.fromiter((x.tid for x in rows), dtype=np.int64, count=len(rows)),
            owner=self, version=net.version,
            job_sent=np.array([job_sent[j] for j in jobs], dtype=float),
        )
        self._table = (stamp, out)
        return out

    def coflow_infos(self, now: float) -> dict[tuple, CoflowInfo]:
        """The same flows as :class:`~raytestbed.core.state.CoflowInfo` records (for ``view.coflows``)."""
        jobs, _ = self._rows()
        out = {}
        for j in jobs:
            v = self.version.get(j, 1)
            xs = list(self.net.by_job[j].values())
            started = self._opened.setdefault(j, min(x.start_s for x in xs))
            out[(j, v, 0)] = CoflowInfo((j, v, 0), j, started, tuple(
                FlowInfo((j, v, 0, x.num), x.src_server, x.dst_server, x.nbytes, x.remaining) for x in xs))
        return out

    # ------------------------------------------------------------------ decisions
    def transfer(self, fid) -> Transfer | None:
        """The transfer in flight that flow id ``(job, run version, 0, n)`` names (None if none)."""
        try:
            jid, v, idx, num = fid
        except (TypeError, ValueError):
            return None
        if idx != 0 or self.version.get(jid) != v:
            return None
        for x in self.net.by_job.get(jid, {}).values():
            if x.num == num:
                return x
        return None

    def knows(self, key) -> bool:
        """Whether ``SetFlowRates`` may name ``key``: a flow in flight, or a key of the fluid model's own
        (a connection key, ``(job, src server, dst server)`` or a job id: :meth:`FluidNet.set_rates`)."""
        if isinstance(key, tuple) and len(key) == 4:
            return self.transfer(key) is not None
        return True

    def apply(self, rates) -> None:
        """Apply a ``SetFlowRates`` mapping: rows of this view's table, flow ids, or the fluid model's keys."""
        net = self.net
        if isinstance(rates, FlowRates) and rates.flows.owner is self and rates.flows.key is not None:
            pairs = []
            ids = rates.flows.flow_ids
            for k, (tid, r) in enumerate(zip(rates.flows.key.tolist(), rates.rates.tolist())):
                x = net.by_tid.get(tid)
                if x is None:
                    raise PolicyError(f"SetFlowRates for unknown flow {ids[k]}")
                pairs.append((x, r))
            net.set_transfer_rates(pairs)
            return
        pairs, other = [], {}
        for key, r in rates.items():
            if isinstance(key, tuple) and len(key) == 4:
                x = self.transfer(key)
                if x is None:
                    raise PolicyError(f"SetFlowRates for unknown flow {key}")
                pairs.append((x, r))
            else:
                other[key] = r
        if pairs:
            net.set_transfer_rates(pairs)
        if other:
            net.set_rates(other)
