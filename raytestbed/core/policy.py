"""The policy base class: events in, decisions out.

Two roles exist and can run together in one trial:

* ``placement`` policies (admission + GPU placement: FIFO, A-SRPT, SJF-BCO, ...)
  emit :class:`~raytestbed.core.events.StartJob`, ``Preempt`` and ``Resize``;
* ``network`` policies (fair sharing, Parrot, Aalo, ...) emit ``SetFlowWeights`` or
  ``SetFlowRates``.

Every event is delivered to both policies; each ignores what it does not need. The backend
measures the wall time of every ``on_event`` call. A policy never imports Ray or torch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from raytestbed.core.events import Decision, Event
from raytestbed.core.state import ClusterView

class Policy(ABC):
    """Base class of every scheduling policy.

    Class attributes:
        name: the policy id used in trial files (e.g. ``fifo``, ``asrpt``).
        description: one line shown by ``raytestbed policies``.
        role: ``placement`` or ``network``.

    Instance attribute ``tick_interval_s``: if not None, the backend sends a
    :class:`Tick` every that many seconds while jobs remain.

    ``predictions``: job id -> the iteration count ñ_i the policy predicted when the job
    arrived. A policy that predicts iteration counts sets its own dict in ``__init__`` and
    fills it while handling :class:`JobArrived`; it never changes an entry afterwards and never
    writes to the (shared) :class:`~raytestbed.core.job.Job`. Backends only read it: right after
    delivering a ``JobArrived`` they copy the entry into the job's record
    (:meth:`raytestbed.core.decisions.DecisionBook.note_predictions`), which becomes the
    ``predicted_iterations`` column of ``jobs.csv``. The default is empty and read-only.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    role: ClassVar[str] = "placement"
    predictions: Mapping[int, int] = MappingProxyType({})

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.tick_interval_s: float | None = None

    @abstractmethod
    def on_event(self, event: Event, view: ClusterView) -> list[Decision]:
        """React to one event; return the decisions to apply now (possibly none)."""

    def params(self) -> dict[str, Any]:
        """Parameters to record in results (override to add more)."""
        return {}
