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

import inspect
from abc import ABC, abstractmethod
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any, ClassVar

from raytestbed.core.events import Decision, Event
from raytestbed.core.state import ClusterView


@lru_cache(maxsize=None)
def _init_signature(cls: type) -> inspect.Signature:
    return inspect.signature(cls.__init__)


def _bound_arguments(cls: type, args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """The constructor arguments of ``cls(*args, **kwargs)`` by parameter name, defaults filled in;
    None if they do not fit the signature (``__init__`` then raises the TypeError)."""
    sig = _init_signature(cls)
    try:
        bound = sig.bind(None, *args, **kwargs)  # None stands for self
    except TypeError:
        return None
    bound.apply_defaults()
    out: dict[str, Any] = {}
    for i, (name, par) in enumerate(sig.parameters.items()):
        if i == 0 or par.kind is par.VAR_POSITIONAL:
            continue
        if par.kind is par.VAR_KEYWORD:
            out.update(bound.arguments.get(name, {}))
        else:
            out[name] = bound.arguments[name]
    return out


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
    #: why the policy needs identical servers (the same GPU count each), e.g. "A-SRPT's g"; None if it
    #: does not. A trial on other servers is refused in one line before anything runs.
    needs_identical_servers: ClassVar[str | None] = None
    #: True: at every ``Tick`` the backend shows running jobs' ``iterations_done`` as of now (the
    #: simulator's analytic timing otherwise updates it only when a job's speed changes or it stops)
    progress_at_ticks: ClassVar[bool] = False
    predictions: Mapping[int, int] = MappingProxyType({})

    def __new__(cls, *args: Any, **kwargs: Any) -> "Policy":
        self = super().__new__(cls)
        self._init_arguments = _bound_arguments(cls, args, kwargs)
        return self

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.tick_interval_s: float | None = None

    @abstractmethod
    def on_event(self, event: Event, view: ClusterView) -> list[Decision]:
        """React to one event; return the decisions to apply now (possibly none)."""

    def get_params(self) -> dict[str, Any]:
        """The policy's parameters: every argument of its constructor, as given or defaulted, by name.

        One mechanism for every policy, as scikit-learn's ``get_params``: the names come from the
        signature of ``__init__`` (list every parameter there, no ``*args``; ``**kwargs`` records
        the keywords given), the values are the arguments the object was made with, captured at
        construction (so a policy need not store them under the same names). ``seed`` is left
        out: results record it as the run's ``seed``. ``type(p)(seed=p.seed, **p.get_params())``
        makes an equal policy. Results record these as ``policy_params`` / ``network_policy_params``.
        """
        args = getattr(self, "_init_arguments", None) or {}
        return {k: v for k, v in args.items() if k != "seed"}
