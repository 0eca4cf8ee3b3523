"""Plug-ins: policies and workload kinds from the package, from installed packages, or from user code.

One :class:`Registry` per kind of plug-in (policies: :data:`raytestbed.schedulers.base.POLICIES`,
workload kinds: :data:`raytestbed.traces.registry.WORKLOADS`). A name given in a trial or on the
command line is looked up in this order:

1. **built-in**: registered by a module of the package (``@register_policy`` in
   ``raytestbed/schedulers/``, ``@register_workload`` in ``raytestbed/traces/``), or by any
   module that imported raytestbed and used the decorator before the name was used;
2. **entry point**: an installed distribution that declares, in its ``pyproject.toml``::

       [project.entry-points."raytestbed.policies"]
       greedy = "my_sched.policies:GreedyPolicy"
       [project.entry-points."raytestbed.workloads"]
       mytrace = "my_sched.traces:load_mytrace"

   The entry point's name is the id (``policy: greedy``); it is imported only when used
   (or listed by ``raytestbed policies`` / ``raytestbed workloads``);
3. **import path** ``module:attribute`` (``policy: my_sched.policies:GreedyPolicy``): the module
   is imported from the installed packages, ``PYTHONPATH``, the current folder or the trial
   file's folder (the last two are searched after everything else). The id is the import path.

A plug-in that cannot be imported, or is not what its kind needs (a policy must be a concrete
:class:`~raytestbed.core.policy.Policy` subclass; a workload kind a callable
``fn(params, ctx) -> list[Job]``), raises :class:`~raytestbed.errors.PluginError`, one line that
names the plug-in and the reason (the CLI exits with status 2).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raytestbed.errors import PluginError

BUILTIN = "built-in"
IMPORT_PATH = "import path"


@dataclass(frozen=True)
class Plugin:
    """A resolved plug-in: its id, the object (class or function) and where it came from."""

    name: str
    obj: Any
    origin: str  #: ``built-in``, ``entry point (DIST)``, ``import path`` or ``registered by MODULE``

    @property
    def builtin(self) -> bool:
        return self.origin == BUILTIN


_POINTERS = re.compile(r"\s*(``params``: see :\w+:`[^`]+`\.?|\(see (the )?module doc(string)?\))")
_ROLE = re.compile(r":\w+:`~?(?:[\w.]*\.)?([^`]+)`")


def describe(obj: Any) -> str:
    """The first line of ``obj``'s docstring (else its module's) as plain text for listings: Sphinx markup
    (``code``, :class:`~a.B`) written out, pointers into the source ("see :class:`Params`") left out."""
    import inspect

    doc = inspect.getdoc(obj) or inspect.getdoc(inspect.getmodule(obj)) or ""
    return plain_text(doc.strip().splitlines()[0]) if doc.strip() else ""


def plain_text(text: str) -> str:
    """``text`` without reStructuredText markup: ``x`` -> x, :class:`~a.b.C` -> C; pointers into the code dropped."""
    text = _POINTERS.sub("", text)
    text = _ROLE.sub(r"\1", text)
    return text.replace("``", "").strip()


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _entry_points(group: str) -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.entry_points(group=group))


def _dist_name(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return getattr(dist, "name", None) or "unknown distribution"


def load_attribute(spec: str, what: str, search: Iterable[Path] = ()) -> Any:
    """Import ``module:attribute`` (attribute may be dotted); :class:`PluginError` naming ``spec`` if it fails.

    ``search``: folders tried after ``sys.path`` (appended to it) when the module is not found.
    """
    module, _, attr = spec.partition(":")
    if not module or not attr or ":" in attr:
        raise PluginError(f"{what} {spec!r}: an import path is written 'package.module:Attribute'")
    try:
        mod = _import(module, search)
    except PluginError:
        raise
    except BaseException as e:  # noqa: BLE001 - anything a user module raises at import is its fault
        if isinstance(e, KeyboardInterrupt):
            raise
        raise PluginError(f"{what} {spec!r}: cannot import {module}: {_one_line(e)}") from None
    obj: Any = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise PluginError(f"{what} {spec!r}: module {module} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def _import(module: str, search: Iterable[Path]):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        top = module.split(".")[0]
        if e.name not in (top, module) and not (e.name and module.startswith(e.name + ".")):
            raise  # the module exists but imports something missing
        added = False
        for d in (Path.cwd(), *search):
            d = str(Path(d).resolve())
            if d not in sys.path:
                sys.path.append(d)
                added = True
        if not added:
            raise
        importlib.invalidate_caches()
        return importlib.import_module(module)


class Registry:
    """Plug-ins of one kind: built-ins, entry points of ``group``, import paths (see the module docstring).

    Args:
        what: what one plug-in is called in messages (``policy``, ``workload kind``).
        group: the entry-point group (``raytestbed.policies``).
        package: the package whose modules register the built-ins (imported on first use).
        check: ``check(obj, label)`` raises :class:`PluginError` (message starting with ``label``)
            if ``obj`` is not a valid plug-in of this kind.
    """

    def __init__(self, what: str, group: str, package: str, check: Callable[[Any, str], None]) -> None:
        self.what = what
        self.group = group
        self.package = package
        self.check = check
        self._registered: dict[str, Plugin] = {}
        self._resolved: dict[str, Plugin] = {}  # entry points, once loaded
        self._discovered = False

    # ------------------------------------------------------------ registration (decorators)
    def register(self, name: str, obj: Any) -> None:
        """Make ``obj`` available as ``name`` (what ``@register_policy`` / ``@register_workload`` do)."""
        if not name:
            raise ValueError(f"{obj!r}: a {self.what} needs a name")
        old = self._registered.get(name)
        if old is not None and old.obj is not obj and not _same_definition(old.obj, obj):
            raise ValueError(f"{self.what} {name!r} registered twice")
        module = getattr(obj, "__module__", "") or ""
        origin = BUILTIN if module.split(".")[0] == "raytestbed" else f"registered by {module}"
        self._registered[name] = Plugin(name, obj, origin)

    def _discover(self) -> None:
        if self._discovered:
            return
        pkg = importlib.import_module(self.package)
        for mod in pkgutil.iter_modules(pkg.__path__):
            if mod.name not in ("base", "registry"):
                importlib.import_module(f"{self.package}.{mod.name}")
        self._discovered = True

    # ------------------------------------------------------------ look-up
    def builtin(self) -> dict[str, Plugin]:
        """Every registered plug-in (the package's and those registered by a decorator), by id."""
        self._discover()
        return dict(sorted(self._registered.items()))

    def entry_points(self) -> dict[str, importlib.metadata.EntryPoint]:
        """Entry points of the group whose name is not a registered id, by name (not loaded)."""
        self._discover()
        return {ep.name: ep for ep in _entry_points(self.group) if ep.name not in self._registered}

    def shadowed(self) -> list[str]:
        """Entry points ignored because a registered plug-in has their name (``name (dist)``)."""
        self._discover()
        return [f"{ep.name} ({_dist_name(ep)})" for ep in _entry_points(self.group) if ep.name in self._registered]

    def names(self) -> list[str]:
        """Ids of the registered plug-ins and of the entry points (none loaded)."""
        return [*self.builtin(), *self.entry_points()]

    def get(self, name: str, search: Iterable[Path] = ()) -> Plugin:
        """The plug-in ``name`` (an id or an import path), loaded and checked.

        Raises :class:`PluginError` for a broken plug-in and for an unknown name (listing the known ids).
        """
        self._discover()
        hit = self._registered.get(name) or self._resolved.get(name)
        if hit is not None:
            return hit
        eps = self.entry_points()
        if name in eps:
            ep = eps[name]
            label = f"{self.what} {name!r} (entry point of {_dist_name(ep)}: {ep.value})"
            try:
                obj = ep.load()
            except BaseException as e:  # noqa: BLE001
                if isinstance(e, KeyboardInterrupt):
                    raise
                raise PluginError(f"{label}: cannot import it: {_one_line(e)}") from None
            self.check(obj, label)
            plugin = Plugin(name, obj, f"entry point ({_dist_name(ep)})")
        elif ":" in name:
            # not cached: a module reloaded (or a notebook cell run again) gives the new definition
            obj = load_attribute(name, self.what, search)
            self.check(obj, f"{self.what} {name!r}")
            return Plugin(name, obj, IMPORT_PATH)
        else:
            known = ", ".join([*self.builtin(), *eps])
            raise PluginError(f"unknown {self.what} {name!r} (known: {known}; or give an import path "
                              f"'module:Attribute')")
        self._resolved[name] = plugin
        return plugin

    def all(self, extra: Iterable[str] = ()) -> list[Plugin]:
        """Every built-in, every entry point (loaded: a broken one raises) and the ``extra`` names."""
        out = list(self.builtin().values())
        out += [self.get(n) for n in self.entry_points()]
        out += [self.get(n) for n in extra if n not in {p.name for p in out}]
        return out


def _same_definition(a: Any, b: Any) -> bool:
    """True if ``a`` and ``b`` are the same class or function defined again (a module re-imported)."""
    return (getattr(a, "__module__", None), getattr(a, "__qualname__", None)) == \
        (getattr(b, "__module__", None), getattr(b, "__qualname__", None))


def ship_by_value(objects: Iterable[Any]) -> None:
    """Make Ray send the code of user plug-ins along with their objects.

    Ray pickles a class by reference (its module name); a worker that cannot import the user's
    module (it is not installed there, or its folder is not on the worker's path) fails. For every
    object whose class comes from a plug-in module loaded by import path (not from raytestbed
    and not from an installed distribution), register its top-level package with Ray's
    cloudpickle to be pickled by value. Classes defined in ``__main__`` (a notebook) are always
    pickled by value.
    """
    import ray.cloudpickle as cp

    for obj in objects:
        module = type(obj).__module__
        top = module.split(".")[0]
        if top in ("raytestbed", "__main__", "builtins") or top not in sys.modules:
            continue
        mod = sys.modules[top]
        if _installed(mod):
            continue
        try:
            cp.register_pickle_by_value(mod)
        except ValueError:  # already registered, or not a module cloudpickle accepts
            pass


def _installed(mod) -> bool:
    """True for a module that lives in an installed distribution's site-packages folder."""
    f = getattr(mod, "__file__", None)
    return f is not None and any(part in ("site-packages", "dist-packages") for part in Path(f).parts)
