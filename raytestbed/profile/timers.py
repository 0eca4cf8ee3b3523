"""Pass timers: what one forward or backward pass of real compute costs, in seconds.

One copy, used by the profiler (:mod:`raytestbed.profile.profiler`) and by the emulator's real
compute (:mod:`raytestbed.emu.executors.compute`), so a profile and the emulator's charges measure
the same thing:

* :class:`ThreadCpuTimer` (device ``cpu``): the calling thread's CPU seconds
  (``time.thread_time()``), with torch's intra-op threads set to 1 by the caller. Waiting for a
  core while other processes run does not count, so a busy host does not inflate it the way it
  inflates wall time. What a busy host still adds is the cost of refilling caches after the
  thread was switched out (on a 2-core host under load, +0.35 ms per switch for a 0.6 ms pass),
  so :meth:`ThreadCpuTimer.measure` also says whether the pass was switched out involuntarily
  (``getrusage(RUSAGE_THREAD).ru_nivcsw``, where the OS has it) and the profiler prefers the
  passes that were not.
* :class:`CudaEventTimer` (device ``cuda``): the GPU seconds between two CUDA events recorded
  around the pass on the current stream, read after synchronising on the end event
  (``Event.elapsed_time`` is in milliseconds). Host-side work inside the pass that the GPU does not
  wait for is not counted; a ``.cpu()`` copy inside the pass is (the stream waits for it).

:func:`make_timer` picks one for a device name (``cpu``, ``cuda``, ``auto``) and falls back to the
CPU timer, with a note saying so, when torch sees no CUDA device.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEVICES = ("cpu", "cuda", "auto")


_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", None)


def _switches() -> int:
    """Involuntary context switches of the calling thread so far (0 where the OS does not count them)."""
    return resource.getrusage(_RUSAGE_THREAD).ru_nivcsw if _RUSAGE_THREAD is not None else 0


class ThreadCpuTimer:
    """Seconds of the calling thread's CPU time spent in ``fn`` (``time.thread_time``)."""

    device = "cpu"
    method = "thread CPU time (time.thread_time)"

    def time(self, fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
        """Run ``fn(*args)``; returns (its result, CPU seconds of this thread)."""
        c0 = time.thread_time()
        out = fn(*args)
        return out, time.thread_time() - c0

    def measure(self, fn: Callable[..., Any], *args: Any) -> tuple[Any, float, bool]:
        """As :meth:`time`, plus whether the thread was switched out involuntarily during the pass."""
        n0 = _switches()
        out, dt = self.time(fn, *args)
        return out, dt, _switches() > n0


class CudaEventTimer:
    """Seconds of GPU time between two CUDA events recorded around ``fn``.

    ``event`` makes one timing event (default ``torch.cuda.Event(enable_timing=True)``); tests pass a
    fake with ``record()``, ``synchronize()`` and ``elapsed_time(end) -> milliseconds``.
    """

    device = "cuda"
    method = "CUDA events (elapsed_time after synchronize)"

    def __init__(self, event: Callable[[], Any] | None = None) -> None:
        if event is None:
            import torch

            def event() -> Any:
                return torch.cuda.Event(enable_timing=True)
        self._event = event

    def time(self, fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
        """Run ``fn(*args)``; returns (its result, GPU seconds between the start and end events)."""
        start, end = self._event(), self._event()
        start.record()
        out = fn(*args)
        end.record()
        end.synchronize()
        return out, start.elapsed_time(end) * 1e-3

    def measure(self, fn: Callable[..., Any], *args: Any) -> tuple[Any, float, bool]:
        """As :meth:`time`; GPU time does not depend on the host thread being switched out (False)."""
        out, dt = self.time(fn, *args)
        return out, dt, False


@dataclass(frozen=True)
class TimerChoice:
    """The timer for a requested device; ``note`` says why it differs from the request ("" if not)."""

    timer: ThreadCpuTimer | CudaEventTimer
    requested: str
    note: str

    @property
    def device(self) -> str:
        return self.timer.device


def cuda_available() -> bool:
    """Whether torch sees a CUDA device in this process."""
    import torch

    return bool(torch.cuda.is_available())


def make_timer(device: str = "cpu", cuda_ok: bool | None = None) -> TimerChoice:
    """The pass timer for ``device`` (``cpu``, ``cuda`` or ``auto``: cuda if torch sees one, else cpu).

    ``cuda`` without a CUDA device falls back to the CPU timer with a note. ``cuda_ok`` overrides the
    detection (tests).

    Raises:
        ValueError: for a device name other than the three.
    """
    if device not in DEVICES:
        raise ValueError(f"device {device!r}: choose one of {', '.join(DEVICES)}")
    ok = cuda_available() if (cuda_ok is None and device != "cpu") else bool(cuda_ok)
    if device == "cpu" or (device == "auto" and not ok):
        return TimerChoice(ThreadCpuTimer(), device, "")
    if not ok:
        return TimerChoice(ThreadCpuTimer(), device,
                           "torch sees no CUDA device: measured on the CPU (thread CPU time) instead")
    return TimerChoice(CudaEventTimer(), device, "")
