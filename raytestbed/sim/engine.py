"""The discrete-event simulator: the ``sim`` backend.

Events (arrivals, completions, flow completions, ticks, faults) are kept in a
heap; time jumps from one event to the next. Two timing modes say how fast a
running job progresses:

* ``analytic``: a job runs at the per-iteration time of an analytic model
  (A-SRPT eq. 7 by default, SJF-BCO eq. 8 or GADGET eq. 1, see
  :mod:`raytestbed.core.timing`). Contention-dependent models (SJF-BCO) are
  re-evaluated for every running job whenever a job starts or ends. Events per
  job: O(1), which lets the simulator handle 150,000 jobs.
* ``flow``: every iteration is a compute phase followed by the job's coflows
  (:mod:`raytestbed.network.traffic`); all flows share links through the weighted
  max-min allocator (:mod:`raytestbed.network.allocator`), so contention
  *emerges*; a network policy may set weights or rates. ``iterations_per_coflow``
  = q lumps q iterations into one cycle (q x compute, q x bytes) to bound the
  event count; q = 1 is exact. Each job's record also gets its *lower bound*
  (Parrot Thm 3 with the §7 compute extension): the sum over the coflows it ran
  of their stand-alone optimal CCT (O3, eq. 26) plus its compute time.

Same events at the same time are ordered: completions, then faults, then
arrivals, then ticks; ties by insertion order. Deterministic for a given input.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from dataclasses import dataclass, field

import numpy as np

from raytestbed.core.cluster import Cluster
from raytestbed.core.decisions import JobRecord
from raytestbed.core.eventcore import P_DONE, EventCore, RunResult
from raytestbed.core.job import Job
from raytestbed.core.policy import Policy
from raytestbed.core.placement import Placement
from raytestbed.core.state import CoflowInfo, FlowInfo
from raytestbed.core.timing import IterationModel, AsrptModel
from raytestbed.errors import PolicyError
from raytestbed.network.allocator import RateAllocator
from raytestbed.network.o3 import o3_cct
from raytestbed.network.traffic import IterationTraffic, iteration_traffic
from raytestbed.core.events import (
    CoflowFinished,
    CoflowStarted,
    Decision,
    Event,
    Fault,
    IterationMeasured,
)

_EPS_BYTES = 1e-6  # a flow with fewer bytes left is complete
_EPS_TIME = 1e-12


#: the simulator's result is the event core's (one type for both backends)
SimResult = RunResult


@dataclass
class _Run:
    """Backend-private progress of a running job."""

    version: int = 0
    # analytic
    alpha: float = math.nan
    last_s: float = 0.0
    # flow
    traffic: IterationTraffic | None = None
    cycle: int = 0
    coflow_idx: int = -1  # -1 = computing
    #: flow id -> [bytes left, total bytes, done at or below (bytes), rate (bytes/s, = Simulator._rates or 0)]
    flows: dict = field(default_factory=dict)
    cycle_start_s: float = 0.0


class Simulator(EventCore):
    """Run one placement policy (and optionally one network policy) over a job list.

    The event loop, the dispatch to the policies and the GPU books are the shared
    :class:`~raytestbed.core.eventcore.EventCore`; this class adds how running jobs progress.

    Args:
        cluster: the cluster.
        jobs: the jobs; ids must be unique.
        policy: the placement/admission policy.
        network_policy: optional network policy (flow mode only).
        mode: ``analytic`` or ``flow``.
        model: iteration-time model for analytic mode (default A-SRPT eq. 7).
        iterations_per_coflow: q, iterations lumped per cycle in flow mode.
        faults: faults to inject.
        on_event: callback receiving every event (for the event log).
        on_decisions: callback (event, policy name, wall seconds, decisions) for
            every ``on_event`` call that returned decisions.
        progress: callback (finished jobs, total jobs) called as jobs finish.
        until_s: optional horizon, seconds: the run stops when the next event lies
            beyond it (jobs still running keep their progress up to ``until_s`` in
            ``SimResult.iterations_done``); None runs until every job finished.
    """

    def __init__(
        self,
        cluster: Cluster,
        jobs: Sequence[Job],
        policy: Policy,
        network_policy: Policy | None = None,
        mode: str = "analytic",
        model: IterationModel | None = None,
        iterations_per_coflow: int = 1,
        faults: Iterable[Fault] = (),
        on_event: Callable[[Event], None] | None = None,
        on_decisions: Callable[[Event, str, float, list[Decision]], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
        until_s: float | None = None,
    ) -> None:
        if mode not in ("analytic", "flow"):
            raise ValueError(f"unknown timing mode {mode!r} (known: analytic, flow)")
        if network_policy is not None and mode != "flow":
            raise ValueError("a network policy needs timing mode 'flow'")
        self.mode = mode
        super().__init__(cluster, jobs, (policy, network_policy), faults, on_event=on_event,
                         on_decisions=on_decisions, progress=progress)
        self.model = model or AsrptModel()
        self.q = int(iterations_per_coflow)
        self.until_s = until_s  #: stop the clock here (None: run until every job finished)
        self._runs: dict[int, _Run] = {}
        # flow mode
        self._alloc = RateAllocator(cluster.link_capacities()) if mode == "flow" else None
        self._flow_owner: dict[tuple, int] = {}
        if mode == "flow":
            self.known_flow = self._flow_owner.__contains__
        self._rates: dict[tuple, float] = {}
        self._rate_override: dict[tuple, float] = {}
        self._job_weight: dict[int, float] = {}
        self._caps: dict | None = None  # link -> capacity, bytes/s
        self._egress = {s.server_id: s.nic_egress_bps for s in cluster.servers}
        self._ingress = {s.server_id: s.nic_ingress_bps for s in cluster.servers}
        self._net_version = 0
        self._net_last = 0.0
        self._flow_links: dict[tuple, tuple] = {}  # flow id -> links it crosses (cluster.path)
        self._link_col = {link: k for k, link in enumerate(cluster.link_capacities())}  # link -> column
        self._flow_cols: dict[tuple, tuple[int, ...]] = {}  # flow id -> columns of its links
        self._flow_cell: dict[tuple, list] = {}  # flow id -> its _Run.flows entry
        # Derived flow-mode state (see _reallocate).
        self._rates_stale = True  # flows, weights or policy rates changed since self._rates was computed
        self._override_checked = False  # the policy rates passed the capacity check; none set since
        self._snap_clean = False  # no byte moved and no flow ended since the last snapshot
        #: coflow id -> (flow ids, bytes left) of its flows at the last reallocation, not yet in state.coflows
        self._coflow_snap: dict[tuple, tuple[list, list]] = {}
        if mode == "flow":
            self.state.coflow_sync = self._sync_coflows

    # ------------------------------------------------------------------ run
    def run(self) -> SimResult:
        """Simulate until every job has finished or nothing more can happen."""
        heap = self._heap
        while heap and self.unfinished > 0:
            if self.until_s is not None and heap[0][0] > self.until_s:
                self._advance(self.until_s)
                break
            t, item = self.pop()
            kind = item[0]
            if kind == "finish":
                _, jid, ver = item
                run = self._runs.get(jid)
                if run is None or run.version != ver:
                    continue  # stale
                self._advance(t)
                self.finish(jid)
            elif kind == "net":
                if item[1] != self._net_version:
                    continue
                self._advance(t)
                self._net_step()
            elif kind == "compute":
                _, jid, ver = item
                run = self._runs.get(jid)
                if run is None or run.version != ver:
                    continue
                self._advance(t)
                self._start_coflow(jid, 0)
                self._reallocate()
            else:
                self._advance(t)
                self.handle(t, item)
                continue
            self.drain()
        self._advance(self.state.now)
        if self.mode == "analytic":
            for jid in list(self.state.running):
                self._sync_analytic(jid)
        else:
            self._sync_coflows()
        return SimResult(
            records=[self.records[j] for j in sorted(self.records)],
            decision_times_s=np.asarray(self.decision_times, dtype=float),
            events=self.events,
            end_time_s=self.state.now,
            busy_gpu_intervals=self.busy,
            iterations_done=dict(self.done_iters),
        )

    def _advance(self, t: float) -> None:
        """Move the clock to ``t``, progressing flows in flow mode."""
        if t < self.state.now - 1e-9:
            raise RuntimeError(f"time went backwards: {t} < {self.state.now}")
        if self._alloc is not None and self._rates:
            dt = t - self._net_last
            if dt > 0:
                self._snap_clean = False
                running = self.state.running
                for jid, run in self._runs.items():
                    if not run.flows:
                        continue
                    rj = running[jid]
                    sent_total = rj.bytes_sent  # added up flow by flow, in flow order
                    for fl in run.flows.values():
                        r = fl[3]
                        if r > 0:  # a flow at rate 0 sends nothing
                            sent = min(fl[0], r * dt)
                            fl[0] -= sent
                            sent_total += sent
                    rj.bytes_sent = sent_total
        self._net_last = max(self._net_last, t)
        self.state.now = max(self.state.now, t)

    # ------------------------------------------------------------- event-core hooks
    @property
    def slows_nics(self) -> bool:
        return self.mode == "flow"

    def slow_nic(self, server: int, factor: float) -> None:
        caps = self.cluster.link_capacities()
        for side in ("egress", "ingress"):
            self._alloc.set_capacity((side, server), caps[(side, server)] / factor)
        self._invalidate_rates()
        self._reallocate()  # no event follows: re-time the flows in flight now

    def after_event(self, event: Event) -> None:
        if self._alloc is not None:
            self._reallocate()

    def set_weights(self, pol: Policy, weights: dict[int, float]) -> None:
        if self._alloc is None:
            raise PolicyError(f"{pol.name}: SetFlowWeights needs timing mode 'flow'")
        self._invalidate_rates()
        for jid, w in weights.items():
            self._job_weight[jid] = w
            run = self._runs.get(jid)
            if run is not None:
                for fid in run.flows:
                    if fid in self._alloc:
                        self._alloc.set_weight(fid, w)

    def set_rates(self, pol: Policy, rates: dict) -> None:
        if self._alloc is None:
            raise PolicyError(f"{pol.name}: SetFlowRates needs timing mode 'flow'")
        self._invalidate_rates()
        self._override_checked = False
        for fid, r in rates.items():
            self._rate_override[fid] = float(r)

    def run_started(self, job: Job, placement: Placement) -> None:
        now = self.state.now
        run = self._runs.setdefault(job.job_id, _Run())
        run.version += 1
        run.last_s = now
        if self.mode == "analytic":
            if self.model.contention_dependent:
                self._reprice_all()
            else:
                self._price(job.job_id)
        else:
            run.traffic = iteration_traffic(job, placement, self.cluster)
            run.cycle_start_s = now
            self._begin_cycle(job.job_id)

    def run_stopped(self, jid: int) -> None:
        if self.mode == "analytic":
            self._sync_analytic(jid)
        else:
            self._drop_flows(jid)
        run = self._runs[jid]
        run.version += 1
        run.alpha = math.nan

    def run_finished(self, jid: int) -> None:
        if self.mode == "flow":
            self._drop_flows(jid)
        self.done_iters[jid] = float(self.jobs[jid].iterations)
        self._runs.pop(jid, None)

    def after_release(self) -> None:
        if self.model.contention_dependent and self.mode == "analytic":
            self._reprice_all()

    # ------------------------------------------------------------ analytic mode
    def _remaining(self, jid: int) -> float:
        return self.jobs[jid].iterations - self.done_iters[jid]

    def _price(self, jid: int) -> None:
        """(Re)compute a running job's iteration time and schedule its finish (analytic mode)."""
        rj = self.state.running[jid]
        run = self._runs[jid]
        others = {k: (r.job, r.placement) for k, r in self.state.running.items() if k != jid}
        alpha = self.model.iteration_time(rj.job, rj.placement, self.cluster, others)
        if not (alpha > 0 and math.isfinite(alpha)):
            raise RuntimeError(f"job {jid}: iteration time {alpha} from model {self.model.name}")
        changed = alpha != run.alpha
        run.alpha = alpha
        run.last_s = self.state.now
        run.version += 1
        rj.iteration_time_s = alpha
        self.records[jid].iteration_time_s = alpha
        self.push(self.state.now + self._remaining(jid) * alpha, P_DONE, ("finish", jid, run.version))
        if changed:
            self.emit(IterationMeasured(self.state.now, jid, alpha, compute_s=math.nan, comm_s=math.nan))

    def _sync_analytic(self, jid: int) -> None:
        run = self._runs[jid]
        if math.isfinite(run.alpha):
            done = (self.state.now - run.last_s) / run.alpha
            self.done_iters[jid] = min(self.jobs[jid].iterations, self.done_iters[jid] + done)
            self.state.running[jid].iterations_done = self.done_iters[jid]
        run.last_s = self.state.now

    def _reprice_all(self) -> None:
        for jid in list(self.state.running):
            self._sync_analytic(jid)
        for jid in list(self.state.running):
            self._price(jid)

    # ------------------------------------------------------------ flow mode
    def _begin_cycle(self, jid: int) -> None:
        """Start the compute phase of the next cycle (q iterations)."""
        run = self._runs[jid]
        run.coflow_idx = -1
        run.cycle_start_s = self.state.now
        q = min(self.q, max(1, math.ceil(self._remaining(jid))))
        self._add_lower_bound(jid, q * run.traffic.compute_s)
        self.push(self.state.now + q * run.traffic.compute_s, P_DONE, ("compute", jid, run.version))

    def _add_lower_bound(self, jid: int, seconds: float) -> None:
        rec = self.records[jid]
        rec.lower_bound_s = seconds if math.isnan(rec.lower_bound_s) else rec.lower_bound_s + seconds

    def _start_coflow(self, jid: int, idx: int) -> None:
        run = self._runs[jid]
        traffic = run.traffic
        if idx >= len(traffic.coflows):
            self._end_cycle(jid)
            return
        run.coflow_idx = idx
        q = min(self.q, max(1, math.ceil(self._remaining(jid))))
        cf_id = (jid, run.cycle, idx)
        w = self._job_weight.get(jid, 1.0)
        infos = []
        total = 0.0
        flows = traffic.coflow(run.cycle, idx)
        intra = max((b * q / self.cluster.intra_bps for s, d, b in flows if s == d), default=0.0)
        self._add_lower_bound(jid, max(intra, q * o3_cct(flows, self._egress, self._ingress)))
        for n, (src, dst, b) in enumerate(flows):
            fid = (jid, run.cycle, idx, n)
            vol = b * q
            run.flows[fid] = self._flow_cell[fid] = [vol, vol, max(_EPS_BYTES, 1e-12 * vol), 0.0]
            total += vol
            self._flow_owner[fid] = jid
            links = self.cluster.path(src, dst)
            self._flow_links[fid] = links
            self._flow_cols[fid] = tuple(self._link_col[link] for link in links)
            cap = self.cluster.intra_bps if not links else math.inf
            self._alloc.add_flow(fid, links, weight=w, cap=cap)
            infos.append(FlowInfo(fid, src, dst, vol, vol))
        self.state.coflows[cf_id] = CoflowInfo(cf_id, jid, self.state.now, tuple(infos))
        self._invalidate_rates()
        self.emit(CoflowStarted(self.state.now, jid, cf_id, total))

    def _end_cycle(self, jid: int) -> None:
        run = self._runs[jid]
        q = min(self.q, max(1, math.ceil(self._remaining(jid))))
        self.done_iters[jid] = min(self.jobs[jid].iterations, self.done_iters[jid] + q)
        rj = self.state.running[jid]
        rj.iterations_done = self.done_iters[jid]
        per_iter = (self.state.now - run.cycle_start_s) / q
        rj.iteration_time_s = per_iter
        self.records[jid].iteration_time_s = per_iter
        self.emit(IterationMeasured(self.state.now, jid, per_iter, compute_s=run.traffic.compute_s,
                                     comm_s=per_iter - run.traffic.compute_s))
        run.cycle += 1
        if self._remaining(jid) <= 1e-9:
            run.version += 1
            self.finish(jid)
        else:
            self._begin_cycle(jid)

    def _drop_flows(self, jid: int) -> None:
        run = self._runs.get(jid)
        if run is None:
            return
        for fid in run.flows:
            self._forget_flow(fid)
        run.flows.clear()
        self._invalidate_rates()
        for cf in [c for c in self.state.coflows if c[0] == jid]:
            del self.state.coflows[cf]
            self._coflow_snap.pop(cf, None)

    def _forget_flow(self, fid: tuple) -> None:
        """Remove flow ``fid`` from the allocator and every per-flow table (not from its run's ``flows``)."""
        if fid in self._alloc:
            self._alloc.remove_flow(fid)
        for table in (self._flow_owner, self._flow_links, self._flow_cols, self._flow_cell, self._rates,
                      self._rate_override):
            table.pop(fid, None)

    def _net_step(self) -> None:
        """Complete every flow that has (numerically) no bytes left."""
        done_coflows = []
        removed = False
        cell_of = self._flow_cell
        for fid in list(self._rates):
            fl = cell_of[fid]
            if fl[0] <= fl[2]:  # max(_EPS_BYTES, 1e-12 * total)
                jid = self._flow_owner[fid]
                run = self._runs[jid]
                self.state.running[jid].bytes_sent += fl[0]
                fl[0] = 0.0
                del run.flows[fid]
                self._forget_flow(fid)
                removed = True
                if not run.flows:
                    done_coflows.append(jid)
        if removed:
            self._invalidate_rates()
            self._snap_clean = False
        for jid in done_coflows:
            run = self._runs[jid]
            cf_id = (jid, run.cycle, run.coflow_idx)
            self._sync_coflow(cf_id)
            info = self.state.coflows.pop(cf_id)
            rj = self.state.running[jid]
            rj.coflows_done += 1
            self.emit(CoflowFinished(self.state.now, jid, cf_id, sum(f.total_bytes for f in info.flows)))
            self._start_coflow(jid, run.coflow_idx + 1)
        self._reallocate()

    def _reallocate(self) -> None:
        """Recompute flow rates (if their inputs changed) and schedule the next flow completion.

        Rates depend only on the flows, their weights and the network policy's rates, so they are
        recomputed only after one of these changed (``_rates_stale``); otherwise the last ones are
        exactly what a recomputation would give. The remaining bytes of the active coflows are
        snapshotted here (plain floats) and turned into ``CoflowInfo`` only when a policy reads
        ``view.coflows`` (:meth:`_sync_coflows`): policies see the bytes of the last reallocation.
        Cost per call: O(active flows) of dict and float operations, no object per flow.
        """
        alloc = self._alloc
        if alloc is None:
            return
        self._net_version += 1
        if len(alloc) == 0:
            self._rates = {}
            self._invalidate_rates()
            return
        runs = self._runs
        if self._rates_stale:
            if self._rate_override:
                rates = self._rates_with_override()
            else:
                rates = alloc.rates()
            self._rates = rates = dict(rates)
            self._rates_stale = False
            for run in runs.values():
                for fid, fl in run.flows.items():
                    fl[3] = rates.get(fid, 0.0)
        if not self._snap_clean:
            for cf_id, info in self.state.coflows.items():
                flows = runs[info.job_id].flows
                self._coflow_snap[cf_id] = (list(flows), [fl[0] for fl in flows.values()])
            self._snap_clean = True
        t_next = math.inf  # seconds until the first flow at a positive rate is done
        for run in runs.values():
            for fl in run.flows.values():
                r = fl[3]
                if r > 0:
                    x = fl[0] / r
                    if x < t_next:
                        t_next = x
        if math.isfinite(t_next):
            self.push(self.state.now + max(t_next, _EPS_TIME), P_DONE, ("net", self._net_version))

    def _invalidate_rates(self) -> None:
        """The flows, weights or policy rates changed: recompute the rates at the next reallocation."""
        self._rates_stale = True

    def _sync_coflows(self) -> None:
        """Write the snapshotted remaining bytes into ``state.coflows`` (the view calls this)."""
        while self._coflow_snap:
            self._sync_coflow(next(iter(self._coflow_snap)))

    def _sync_coflow(self, cf_id: tuple) -> None:
        """Replace coflow ``cf_id``'s info by its flows still active at the last reallocation, with
        their remaining bytes then (a no-op without a pending snapshot)."""
        snap = self._coflow_snap.pop(cf_id, None)
        if snap is None:
            return
        left = dict(zip(*snap))
        info = self.state.coflows[cf_id]
        self.state.coflows[cf_id] = CoflowInfo(
            cf_id, info.job_id, info.started_s,
            tuple(f if f.remaining_bytes == left[f.flow_id]  # a flow at rate 0 keeps its record
                  else FlowInfo(f.flow_id, f.src, f.dst, f.total_bytes, left[f.flow_id])
                  for f in info.flows if f.flow_id in left),
        )

    def _rates_with_override(self) -> dict:
        """Policy-set rates for some flows; max-min on the residual capacity for the rest (bytes/s).

        The load of the policy rates on every link is summed flow by flow in the policy's order
        (``np.bincount`` adds sequentially). When every flow has a policy rate and the policy set
        none since the last capacity check passed, the check is skipped: flows were only removed
        since, and a sub-sequence of non-negative rates sums (in order, rounded) to no more than
        the whole, so it would pass.
        """
        override = self._rate_override
        if self._override_checked and len(override) == len(self._flow_owner):
            return dict(override)  # every flow has a policy rate (they are a subset)
        caps = self._caps
        if caps is None:
            caps = self._caps = self.cluster.link_capacities()
        cap = np.fromiter(caps.values(), dtype=float, count=len(caps))
        cols = [self._flow_cols[fid] for fid in override]
        counts = np.fromiter(map(len, cols), dtype=np.intp, count=len(cols))
        inc_col = np.fromiter(chain.from_iterable(cols), dtype=np.intp, count=int(counts.sum()))
        inc_rate = np.repeat(np.fromiter(override.values(), dtype=float, count=len(cols)), counts)
        used = np.bincount(inc_col, weights=inc_rate, minlength=cap.size)  # bytes/s per link
        over = used - cap > 1e-9 * cap
        if over.any():  # name the first link, in the policy's flow order, that a positive rate overloads
            first = int(np.argmax(over[inc_col] & (inc_rate != 0)))
            link = list(caps)[int(inc_col[first])]
            raise PolicyError(f"network policy rates exceed capacity of link {link}")
        self._override_checked = True
        flow_links = self._flow_links
        link_col = self._link_col
        out = dict(self._rate_override)
        rest = [(fid, jid) for fid, jid in self._flow_owner.items() if fid not in self._rate_override]
        if not rest:
            return out
        tmp = RateAllocator()
        added: set = set()
        for fid, jid in rest:
            links = flow_links[fid]
            for link in links:
                if link not in added:
                    added.add(link)
                    tmp.add_link(link, max(caps[link] - float(used[link_col[link]]), 1e-9 * caps[link]))
            tmp.add_flow(fid, links, weight=self._job_weight.get(jid, 1.0),
                         cap=self.cluster.intra_bps if not links else math.inf)
        out.update(tmp.rates())
        return out
