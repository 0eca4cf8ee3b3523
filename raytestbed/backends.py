"""The backends by name (``--backend sim``, ``--backend emu``): each a :class:`raytestbed.core.backend.Backend`.

Here, above both, so that neither backend imports the other; :mod:`raytestbed.trial` finds a backend
by the name a trial or the command line gives and never asks which one it holds.
"""

from __future__ import annotations

from raytestbed.core.backend import Backend
from raytestbed.emu.backend import EmuBackend
from raytestbed.errors import ConfigError
from raytestbed.sim.backend import SimBackend

BACKENDS: dict[str, Backend] = {b.name: b for b in (SimBackend(), EmuBackend())}


def get_backend(name: str) -> Backend:
    """The backend called ``name``; ConfigError (one line) naming the known ones otherwise."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise ConfigError(f"backend {name!r}: expected {' or '.join(BACKENDS)}") from None
