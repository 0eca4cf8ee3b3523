"""raytestbed: try GPU-cluster schedulers for distributed deep-learning jobs.

The same policy objects run in a discrete-event simulator (``raytestbed.sim``)
and on an emulated GPU cluster built from Ray actors (``raytestbed.emu``).
Units everywhere: seconds, bytes, bytes/s.

The public Python API (:mod:`raytestbed.api`) is importable from here, e.g.
``from raytestbed import Policy, StartJob, load_trial, compare``; it is loaded on first use,
so ``import raytestbed`` stays cheap.
"""

__version__ = "0.1.0"


def _api():
    import importlib

    return importlib.import_module("raytestbed.api")


def __getattr__(name: str):
    import importlib.util

    # a submodule not imported yet (``from raytestbed import emu``) is the import system's to load
    if not name.startswith("_") and importlib.util.find_spec(f"raytestbed.{name}") is None:
        api = _api()
        if name in getattr(api, "__all__", ()):
            return getattr(api, name)
    raise AttributeError(f"module 'raytestbed' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_api().__all__})
