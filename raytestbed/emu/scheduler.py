"""The emulator's scheduler: the shared event core (:class:`~raytestbed.core.eventcore.EventCore`) on the
virtual clock, which holds the policy objects unchanged and turns their decisions into run starts and
stops, fabric weights and rates (docs/emulator.md, "Emulated trials"). Emulated seconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from raytestbed.core.eventcore import EventCore
from raytestbed.core.events import (
    CoflowFinished,
    CoflowGrew,
    CoflowStarted,
    Fault,
    IterationMeasured,
    JobFailed,
)
from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.core.policy import Policy
from raytestbed.core.profile import default_profiles
from raytestbed.emu.flowview import FlowView
from raytestbed.emu.run import Run
from raytestbed.errors import PolicyError
from raytestbed.execution.monitor import IterationRow


class EmuScheduler(EventCore):
    """The event core on the virtual clock: the policies decide, runs start and stop.

    ``service``: the :class:`~raytestbed.emu.clock_service.ClockService` it runs in (its clock, runs,
    fast-forward and the batch the driver polls).

    Timed events (arrivals, ticks, wake-ups, faults) live in the clock's heap, handed to the event
    core (``heap``) and pushed through the clock (:meth:`VirtualClock.schedule`); completed
    iterations become ``IterationMeasured`` (the measured iteration time), the last one
    ``JobFinished``; coflows of the fabric become ``CoflowStarted`` / ``CoflowFinished``.
    A decision is applied at once at the clock's time: ``StartJob`` registers and launches a
    run, ``Preempt`` drops it (the job keeps its completed iterations), ``SetFlowWeights`` /
    ``SetFlowRates`` change the fabric's allocation now.
    """

    def __init__(self, service, jobs: Sequence[Job], policies: Sequence[Policy],
                 faults: Sequence[Fault] = (), mode: str = "replay", compute_factor: float | None = None,
                 window: int = 10, device: str = "cpu", speeds=None, restore_s: float = 0.0,
                 profiles=None) -> None:
        self.service = service
        self.mode = mode
        self.profiles = profiles  # real compute: model name -> per-layer profile (None: the shipped ones)
        self.compute_factor = compute_factor
        self.device = device
        self.window = window
        self.run_of: dict[int, tuple] = {}
        self.warnings: list[str] = []
        self._estimates: dict[int, list[float]] = {}
        super().__init__(service.cluster, jobs, policies, faults,
                         on_event=lambda ev: service.out.events.append(ev),
                         on_decisions=lambda ev, name, dt, ds: service.out.decisions.append((ev, name, dt, list(ds))),
                         heap=service.clock.heap, speeds=speeds, restore_s=restore_s)
        self.network_policy = any(p.role == "network" for p in self.policies)
        # what network policies read: the fluid model's transfers laid out as the flow simulator's table
        self.flowview = FlowView(service.clock.net, jobs, service.clock.fabric_bytes)
        self.state.flow_arrays = self._flow_arrays
        self.state.coflow_sync = self._sync_coflows
        self.known_flow = self.flowview.knows

    # ------------------------------------------------------------------ timed events on the clock
    def push(self, t: float, prio: int, item: tuple) -> None:
        self.service.clock.schedule(t, prio, item)

    def timed(self, t: float, item: tuple) -> None:
        self.state.now = t
        self._sync_bytes()
        self.handle(t, item)

    # ------------------------------------------------------------------ reports from runs
    def iteration(self, run: Run, row: IterationRow) -> None:
        jid = run.job.job_id
        if self.run_of.get(jid) != run.run_id:
            return
        self.state.now = row.end_s
        self._sync_bytes()
        rj = self.state.running[jid]
        self.done_iters[jid] = self.credit(jid, run.monitor.start_iteration, run.monitor.done)
        rj.iterations_done = self.done_iters[jid]
        est = self._estimates.setdefault(jid, [])
        est.append(row.iter_s)
        tail = est[1:] if len(est) > 1 else est  # the run's first iteration includes pipeline fill
        rj.iteration_time_s = self.records[jid].iteration_time_s = float(np.mean(tail[-self.window:]))
        self.emit(IterationMeasured(row.end_s, jid, row.iter_s, compute_s=row.compute_s, comm_s=row.comm_s))
        self.drain()

    def run_done(self, run: Run) -> None:
        jid = run.job.job_id
        if self.run_of.get(jid) != run.run_id:
            return
        self.state.now = self.service.clock.now
        self.finish(jid)
        self.service.out.records[jid] = self.records[jid]
        self.service.out.measured[jid] = self.service.job_measured(jid)
        self.drain()

    def job_failed(self, jid: int, reason: str) -> None:
        """A worker of ``jid``'s run died (or its launch failed): the job is pending again."""
        self.state.now = self.service.clock.now
        self._sync_bytes()
        self.stop(jid, "failures")
        self.emit(JobFailed(self.state.now, jid, reason))
        self.warnings.append(f"job {jid}: {reason}")
        self.drain()

    def lose_server(self, server: int) -> None:
        """A server died outside the trial's injected faults (found dead by the driver)."""
        if server in self.state.lost_servers:
            return
        self.state.now = self.service.clock.now
        self.kill_server(server)
        self.drain()

    def coflow(self, kind: str, t: float, jid: int, coflow, nbytes: float) -> None:
        """A coflow of a running job started, grew or finished now (the fabric saw its first transfer start, a
        later one start, or its last one in flight end): counted now, reported to the policies when the
        instant has settled."""
        rj = self.state.running.get(jid)
        if rj is None:
            return
        cid = coflow if isinstance(coflow, tuple) else (coflow,)
        if kind == "started":
            self.emit_settled(CoflowStarted(t, jid, cid, nbytes))
        elif kind == "grew":
            self.emit_settled(CoflowGrew(t, jid, cid, nbytes))
        else:
            rj.coflows_done += 1
            self.emit_settled(CoflowFinished(t, jid, cid, nbytes))

    def settled(self) -> None:
        """Nothing more happens at the clock's now: deliver the instant's coflow events."""
        self.state.now = self.service.clock.now
        self._sync_bytes()
        self.deliver_settled()

    def _sync_bytes(self) -> None:
        """Refresh what the policies read of running jobs: bytes sent in the current run (as the flow
        simulator counts them: what the job's transfers through the fabric moved so far,
        :meth:`FlowView.sent`), iterations done (fast-forwarded iterations counted as their time passes)."""
        sent = self.flowview.sent
        for jid, rj in self.state.running.items():
            rj.bytes_sent = sent(jid)
            run = self.service.runs.get(self.run_of.get(jid))
            if run is not None:
                rj.iterations_done = self.credit(jid, run.monitor.start_iteration, self.service.fast_forward.progress(run))

    # ------------------------------------------------------------------ event-core hooks
    def run_started(self, job: Job, placement: Placement) -> None:
        done = int(self.done_iters[job.job_id])
        profile = None
        if self.mode == "real":
            profile = (self.profiles if self.profiles is not None else default_profiles()).get(job.model)
        steps = math.ceil(self.steps_left(job.job_id) - 1e-9)
        # every worker computes at its GPU type's speed; a restarted job's run starts after its restore
        run = self.service.new_run(job, placement, steps, done, self.mode, self.compute_factor, profile, self.device,
                                   self.state.speeds, self.restore_until(job.job_id))
        self.run_of[job.job_id] = run.run_id
        self._estimates[job.job_id] = []
        self.flowview.run_started(job.job_id)

    def run_stopped(self, jid: int) -> None:
        rid = self.run_of.pop(jid, None)
        if rid is not None:
            run = self.service.runs[rid]
            self.service.drop_run(rid)  # first: a fast-forward window is cut at now
            self.done_iters[jid] = self.credit(jid, run.monitor.start_iteration, run.monitor.done)

    def run_finished(self, jid: int) -> None:
        self.run_of.pop(jid, None)
        self.done_iters[jid] = float(self.jobs[jid].iterations)

    def server_lost(self, server: int) -> None:
        self.service.out.kills.append(server)

    slows_nics = True

    def slow_nic(self, server: int, factor: float) -> None:
        self.service.links_changed(frozenset({("egress", server), ("ingress", server)}))
        for side in ("egress", "ingress"):
            self.service.clock.net.set_link_factor((side, server), factor)

    def set_weights(self, pol: Policy, weights: dict[int, float]) -> None:
        self.service.links_changed(None)
        self.service.clock.net.set_weights(weights)

    def set_rates(self, pol: Policy, rates: dict) -> None:
        self.service.links_changed(None)
        try:
            self.flowview.apply(rates)
        except PolicyError as e:
            raise PolicyError(f"{pol.name}: {e}") from None

    def _flow_arrays(self):
        """``view.flows()``: the transfers in flight as the flow simulator's table, bytes left as of now."""
        self._sync_bytes()
        return self.flowview.flows({j: rj.bytes_sent for j, rj in self.state.running.items()})

    def _sync_coflows(self) -> None:
        """``view.coflows``: the same flows as coflow records."""
        self.state.coflows.clear()
        self.state.coflows.update(self.flowview.coflow_infos(self.state.now))
