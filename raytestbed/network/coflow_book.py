"""When a coflow starts and when it is complete: the rule both backends' worker-by-worker runs use.

A coflow is the set of flows of one communication phase of one iteration: one stage's ring
all-reduce (2(k-1) steps of k chunks), the workers' push to the parameter servers, or the servers'
pull back (spec README, "Turning a job's per-iteration traffic into coflows"; Parrot §2.2). It
starts with its first transfer and is complete only when all its flows are, that is when its
transfers have moved its whole size (``coflow_bytes``, known when it starts, as Parrot §4.1
assumes). Between a ring's steps, or while a slow worker has not yet pushed, no transfer of the
coflow may be in flight: it is still the same, unfinished coflow. A transfer that starts after the
first grows it (the backends report a ``CoflowGrew``, so a network policy can rate the flows that
joined).

A coflow of unknown size (0 bytes) is complete when none of its transfers is in flight.
"""

from __future__ import annotations

from collections.abc import Hashable

#: relative slack when the bytes arrived are compared with the coflow's size (sums of scaled sizes)
REL_TOL = 1e-9


class CoflowBook:
    """Coflows in progress: per coflow, its transfers in flight, bytes arrived, size and owner.

    ``start`` when a transfer of a coflow starts, ``arrive`` when one arrives, ``drop`` for every
    coflow of an owner (a run that was dropped: no finish is reported for them). Sizes are bytes.
    """

    __slots__ = ("_open",)

    def __init__(self) -> None:
        self._open: dict[Hashable, list] = {}  # coflow -> [in flight, bytes arrived, size, owner]

    def start(self, coflow: Hashable, size_bytes: float, owner: Hashable = None) -> bool:
        """A transfer of ``coflow`` (of ``size_bytes`` in all) starts; True if it is the coflow's first."""
        cf = self._open.get(coflow)
        if cf is None:
            self._open[coflow] = [1, 0.0, float(size_bytes), owner]
            return True
        cf[0] += 1
        return False

    def arrive(self, coflow: Hashable, nbytes: float) -> float | None:
        """A transfer of ``coflow`` moved its ``nbytes``: the coflow's bytes if that completed it, else None."""
        cf = self._open[coflow]
        cf[0] -= 1
        cf[1] += nbytes
        if cf[0] > 0 or (cf[2] > 0 and cf[1] < cf[2] * (1.0 - REL_TOL)):
            return None
        del self._open[coflow]
        return cf[1]

    def drop(self, owner: Hashable) -> None:
        """Forget every coflow started by ``owner`` (its run ended before they completed)."""
        for c in [c for c, cf in self._open.items() if cf[3] == owner]:
            del self._open[c]

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, coflow: Hashable) -> bool:
        return coflow in self._open
