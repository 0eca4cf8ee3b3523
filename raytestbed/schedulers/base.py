"""The policy registry.

The policy interface lives in :mod:`raytestbed.core` (events and decisions in
:mod:`raytestbed.core.events`, the :class:`Policy` base class in
:mod:`raytestbed.core.policy`); a user imports all of it from ``raytestbed``
(:mod:`raytestbed.api`), the package's own policies from ``core``.

To add a policy to the package: write one module in ``raytestbed/schedulers/`` with a
subclass of :class:`Policy` decorated by :func:`register_policy`; it is then available to
trials and to ``raytestbed policies``. A policy outside the package (a user's own file, an
installed distribution) is a plug-in: :mod:`raytestbed.plugins`.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from raytestbed.core.policy import Policy
from raytestbed.errors import PluginError, PolicyError
from raytestbed.plugins import Registry, plain_text

ROLES = ("placement", "network")


def _check_policy(obj: Any, label: str) -> None:
    """Raise :class:`PluginError` unless ``obj`` is a concrete Policy subclass with a known role."""
    if not inspect.isclass(obj):
        raise PluginError(f"{label}: it is a {type(obj).__name__}, not a subclass of raytestbed.Policy")
    if not issubclass(obj, Policy):
        raise PluginError(f"{label}: class {obj.__qualname__} does not subclass raytestbed.Policy")
    if inspect.isabstract(obj):
        missing = ", ".join(sorted(obj.__abstractmethods__))
        raise PluginError(f"{label}: class {obj.__qualname__} is abstract (it does not implement {missing})")
    if obj.role not in ROLES:
        raise PluginError(f"{label}: role must be one of {', '.join(ROLES)}, got {obj.role!r}")


#: every policy: the package's (``@register_policy``), entry points ``raytestbed.policies``, import paths
POLICIES = Registry("policy", "raytestbed.policies", "raytestbed.schedulers", _check_policy)


def register_policy(cls: type[Policy]) -> type[Policy]:
    """Class decorator: make a policy available by its ``name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    _check_policy(cls, f"policy {cls.name!r}")
    POLICIES.register(cls.name, cls)
    return cls


def available_policies() -> dict[str, type[Policy]]:
    """Policy id -> class, for every registered policy (entry points and import paths: :data:`POLICIES`)."""
    return {name: p.obj for name, p in POLICIES.builtin().items()}


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


def policy_class(name: str, search: Iterable[Path] = ()) -> type[Policy]:
    """The class of policy ``name`` (an id, an entry point or an import path ``module:Class``).

    ``search``: extra folders for import paths (the trial file's folder). Raises
    :class:`PolicyError` for an unknown id, :class:`PluginError` for a broken plug-in.
    """
    return POLICIES.get(name, search).obj


def describe_policy(cls: type[Policy]) -> str:
    """The one line ``raytestbed policies`` shows: ``description``, else the docstring's first line."""
    if cls.description:
        return plain_text(cls.description)
    doc = (inspect.getdoc(cls) or "").strip()
    return plain_text(doc.splitlines()[0]) if doc and cls.__doc__ is not Policy.__doc__ else ""


def make_policy(name: str, role: str | None = None, seed: int = 0, search: Iterable[Path] = (),
                **params: Any) -> Policy:
    """Instantiate policy ``name`` (id, entry point or import path); :class:`PolicyError` for an unknown id
    or bad params, :class:`PluginError` for a broken plug-in. The instance's ``name`` is ``name``."""
    if ":" not in name and name not in POLICIES.names():
        known = [n for n, c in available_policies().items() if role is None or c.role == role]
        known += list(POLICIES.entry_points())
        raise PolicyError(f"unknown {role + ' ' if role else ''}policy {name!r} (available: {', '.join(known)}; "
                          f"or an import path 'module:Class')")
    cls = policy_class(name, search)
    if role is not None and cls.role != role:
        raise PolicyError(f"policy {name!r} is a {cls.role} policy, not a {role} policy")
    _check_types(cls, name, params)
    try:
        pol = cls(seed=seed, **params)
    except TypeError as e:
        raise PolicyError(f"policy {name!r}: bad parameters {sorted(params)}: {e}") from None
    except (ValueError, OverflowError) as e:  # a constructor's own range check, or a value it cannot convert
        raise PolicyError(f"policy {name!r}: bad parameters {sorted(params)}: {e}") from None
    if pol.name != name:
        pol.name = name  # a plug-in is known by the id it was named with (logs, results)
    return pol
