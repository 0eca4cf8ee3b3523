"""Policy registry, and the one import for policy authors.

The policy interface lives in :mod:`raytestbed.core` (events and decisions in
:mod:`raytestbed.core.events`, the :class:`Policy` base class in
:mod:`raytestbed.core.policy`); this module re-exports them and keeps the registry.

To add a policy: write one module in ``raytestbed/schedulers/`` with a subclass
of :class:`Policy` decorated by :func:`register_policy`; it is then available to
trials and to ``raytestbed policies``.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from raytestbed.core.decisions import job_for_placement  # noqa: F401  (re-export)
from raytestbed.core.events import (  # noqa: F401  (re-export)
    CoflowFinished,
    CoflowStarted,
    Decision,
    Event,
    Fault,
    IterationMeasured,
    JobArrived,
    JobFailed,
    JobFinished,
    JobStarted,
    Preempt,
    Resize,
    ServerLost,
    SetFlowRates,
    SetFlowWeights,
    StartJob,
    Tick,
    WakeUp,
)
from raytestbed.core.policy import Policy
from raytestbed.errors import PolicyError


_REGISTRY: dict[str, type[Policy]] = {}
_DISCOVERED = False


def register_policy(cls: type[Policy]) -> type[Policy]:
    """Class decorator: make a policy available by its ``name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"policy name {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    import raytestbed.schedulers as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.name != "base":
            importlib.import_module(f"{pkg.__name__}.{mod.name}")
    _DISCOVERED = True


def available_policies() -> dict[str, type[Policy]]:
    """Policy id -> class, for every registered policy."""
    _discover()
    return dict(sorted(_REGISTRY.items()))


def _check_types(cls: type, name: str, params: dict[str, Any]) -> None:
    """Each parameter against the constructor's annotation (strict: no bool for a number, no text for a
    number, an int for a float is fine); PolicyError naming the first bad one. The values passed on are
    the caller's, unchanged; ranges stay the constructor's own checks."""
    import typing

    from pydantic import TypeAdapter, ValidationError

    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # an annotation that does not resolve: leave the checks to the constructor
        return
    for key, value in params.items():
        if key in hints:
            plain = value.item() if hasattr(value, "item") and getattr(value, "ndim", None) == 0 else value  # numpy scalar
            try:
                TypeAdapter(hints[key]).validate_python(plain, strict=True)
            except ValidationError as e:
                msg = e.errors()[0]["msg"]
                raise PolicyError(f"policy {name!r}: parameter {key}: {msg}, got {value!r}"[:300]) from None


def make_policy(name: str, role: str | None = None, seed: int = 0, **params: Any) -> Policy:
    """Instantiate a policy by id; raise :class:`PolicyError` for an unknown id or bad params."""
    pols = available_policies()
    if name not in pols:
        known = ", ".join(n for n, c in pols.items() if role is None or c.role == role)
        raise PolicyError(f"unknown {role + ' ' if role else ''}policy {name!r} (available: {known})")
    cls = pols[name]
    if role is not None and cls.role != role:
        raise PolicyError(f"policy {name!r} is a {cls.role} policy, not a {role} policy")
    _check_types(cls, name, params)
    try:
        return cls(seed=seed, **params)
    except TypeError as e:
        raise PolicyError(f"policy {name!r}: bad parameters {sorted(params)}: {e}") from None
    except (ValueError, OverflowError) as e:  # a constructor's own range check, or a value it cannot convert
        raise PolicyError(f"policy {name!r}: bad parameters {sorted(params)}: {e}") from None
