"""Shared driver of the coflow network policies (Parrot, Aalo, LCCF).

A coflow policy recomputes the rate of every active flow when it observes a
scheduling event (a coflow becomes valid or completes, Parrot Alg. 1 S1; or flows
join a valid coflow, :class:`~raytestbed.core.events.CoflowGrew`: a worker that pushes
late, a ring's next step) and emits them as one :class:`SetFlowRates`; rates stay
frozen between decisions.

Observation: with ``observe_interval_s`` = None (default) events
are observed at once. With eta > 0 the policy only looks at multiples of eta
(Parrot Fig. 7): a newly valid coflow, and the flows that join a valid one, get rate 0
until the next multiple, the bandwidth of a finished coflow stays unused until then. The policy asks for a
:class:`Tick` (a :class:`WakeUp`) at the first multiple of eta at or after an event it has not acted
on, and only then (an event on a multiple -- in the trace, every arrival at a whole second -- is seen
there): a tick at which nothing changed would leave every rate as it is, and at eta = 1 ms a
periodic tick would cost the backend a step every simulated millisecond (~10^7 for one of Fig. 7's
full-trace runs) for no decision.

Subclasses implement :meth:`CoflowPolicy.compute_rates` on the array interface: a
:class:`~raytestbed.core.flows.Flows` table from ``view.flows()`` (bytes left, total bytes,
flow-to-link incidence, each coflow's job and its bytes sent) in, one rate per flow out, sent as
``SetFlowRates(FlowRates(flows, rates))``: the simulator applies the array as it is, other
backends read it as a flow id -> rate mapping.

Defaults of the work-conserving step (:data:`FILL_RESIDUAL_DEFAULT` here, Parrot's
``fill_order`` in :mod:`raytestbed.schedulers.parrot`) are the configuration that
docs/results.md reports: no residual max-min pass for Parrot, Aalo or LCCF.
"""

from __future__ import annotations

import math
from abc import abstractmethod

import numpy as np

from raytestbed.core.eventcore import EventCore
from raytestbed.core.flows import FlowRates
from raytestbed.core.state import ClusterView
from raytestbed.errors import PolicyError
from raytestbed.core.flows import Flows, FlowTable, LinkIndex
from raytestbed.core.events import (CoflowFinished, CoflowGrew, CoflowStarted, Decision, Event, SetFlowRates, Tick,
                                    WakeUp)
from raytestbed.core.policy import Policy

#: Default of ``fill_residual`` for every coflow policy (Parrot, Aalo, LCCF): no weighted max-min
#: pass over the capacity the paper's rules leave (an extension); Aalo/LCCF fill
#: greedily as the paper describes them. The reported configuration (docs/results.md).
FILL_RESIDUAL_DEFAULT = False


class CoflowPolicy(Policy):
    """Base class: event/tick handling and the SetFlowRates output; not registered itself."""

    role = "network"

    def __init__(self, seed: int = 0, observe_interval_s: float | None = None, fast_path: bool = True) -> None:
        super().__init__(seed)
        #: vectorised readers/fillers (same rates as the straightforward code, fast_path=False;
        #: tests/test_parrot.py::test_fast_path_same_rates, scripts/bench_parrot.py)
        self.fast_path = bool(fast_path)
        if observe_interval_s is not None and not (observe_interval_s > 0):
            raise PolicyError(f"{self.name}: observe_interval_s must be > 0 seconds or null, "
                              f"got {observe_interval_s!r}")
        self.observe_interval_s = observe_interval_s
        self._table = FlowTable(fast=self.fast_path)
        self._wake_s: float | None = None  #: the multiple of eta asked for, seconds (None: nothing to observe)
        self._last_sig: tuple | None = None

    def on_event(self, event: Event, view: ClusterView) -> list[Decision]:
        if self.observe_interval_s is None:
            if isinstance(event, (CoflowStarted, CoflowGrew, CoflowFinished)):
                return self.decide(view)
            return []
        if isinstance(event, (CoflowStarted, CoflowGrew)):
            return [*self._hold(event, view), *self._observe_later(event.time)]
        if isinstance(event, CoflowFinished):
            return self._observe_later(event.time)
        if isinstance(event, Tick) and self._wake_s is not None and event.time >= self._wake_s:
            self._wake_s = None  # a tick another policy asked for before ours is not a multiple of eta
            return self.decide(view)
        return []

    def _hold(self, event: CoflowStarted | CoflowGrew, view: ClusterView) -> list[Decision]:
        """Rate 0, until the next multiple of eta, for the flows of ``event``'s job that have moved nothing: the
        flows of a coflow that started or that joined one that grew, which the policy has not observed yet
        (a flow it rated 0 before stays at 0). By job, as the table shows a job run worker by worker: its
        transfers in flight as one coflow of its own id, one active coflow per job (Parrot §4.1)."""
        flows = self._read(view)
        job = np.asarray(flows.coflow_job, dtype=np.int64)[flows.cf] == event.job_id
        rows = np.flatnonzero(job & (flows.remaining >= flows.total))
        if not rows.size:
            return []
        self._last_sig = None  # the rates set now differ from the last decision's, even at the same instant
        return [SetFlowRates(FlowRates(flows.subset(rows), np.zeros(rows.size)))]

    def _observe_later(self, now: float) -> list[Decision]:
        """An event at ``now`` (seconds) is to be observed at the first multiple of eta at or after it (an event
        on a multiple, within the clock's resolution :attr:`EventCore.SETTLE_S`, is seen there, after the other
        events of that instant): a ``WakeUp`` for it, unless one is already asked for."""
        if self._wake_s is not None:
            return []
        eta = self.observe_interval_s
        k = math.ceil(now / eta)
        if (k - 1) * eta >= now - EventCore.SETTLE_S:  # now / eta rounded up past a multiple it is on
            k -= 1
        if k * eta < now - EventCore.SETTLE_S:  # rounded down
            k += 1
        self._wake_s = max(k * eta, now)
        return [WakeUp(self._wake_s)]

    def _read(self, view: ClusterView) -> Flows:
        """The active flows: the backend's table (``view.flows()``), or with ``fast_path: false`` the
        reference reader of ``view.coflows`` (the same table, element for element)."""
        return view.flows() if self.fast_path else self._table.read(view)

    def decide(self, view: ClusterView) -> list[Decision]:
        """Rates for every flow of every active coflow (nothing if the active set did not change)."""
        flows = self._read(view)
        sig = (view.now, flows.signature())
        if sig == self._last_sig or not flows.n_coflows:
            self._last_sig = sig
            return []
        self._last_sig = sig
        rates = self.compute_rates(flows, self._table.links(view.cluster), view)
        return [SetFlowRates(FlowRates(flows, rates))]

    def rates_for(self, view: ClusterView) -> tuple[Flows, np.ndarray]:
        """The flow table and the rates the policy would set now (for tests and benchmarks)."""
        flows = self._read(view)
        return flows, self.compute_rates(flows, self._table.links(view.cluster), view)

    @abstractmethod
    def compute_rates(self, flows: Flows, links: LinkIndex, view: ClusterView) -> np.ndarray:
        """Rate (bytes/s) of every flow in ``flows``."""
