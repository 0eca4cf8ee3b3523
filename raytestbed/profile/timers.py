"""Pass timers: what one forward or backward pass of real compute costs, in seconds.

One copy, used by the profiler (:mod:`raytestbed.profile.profiler`) and by the emulator's real
compute (:mod:`raytestbed.emu.executors.compute`), so a profile and the emulator's charges measure
the same thing:

* :class:`ThreadCpuTimer` (device ``cpu``): the calling thread's CPU seconds
  (``time.thread_time()``), with torch's intra-op threads set to 1 by the caller. Waiting for a
  core while other processes run does not count, so a busy host does not inflate it the way it
  inflates wall time. What a busy host still adds is the cost of refilling caches after the
  thread was switched out (on a 2-core host under load, +0.35 ms per switch for a 0.6 ms pass),
  so :meth:`ThreadCpuTimer.switch_count` reads the thread's involuntary switches
  (``getrusage(RUSAGE_THREAD).ru_nivcsw``, where the OS has it) and the profiler prefers the
  passes that no switch went cold. Making a :class:`ThreadCpuTimer` also keeps freed heap memory in the
  process (:func:`hold_freed_memory`): with glibc's defaults every pass returns its large tensors'
  pages to the OS and faults them in again, kernel time that thread CPU time counts and that varies
  with the host (resnet-small on a 2-core host: ~3,800 page faults and 14 ms of system time per
  forward and backward, ~10 % of the pass; none once held).
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

#: glibc ``mallopt`` parameters (malloc.h) and the values :func:`hold_freed_memory` sets
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024  #: glibc's largest mmap threshold on 64-bit hosts
_TRIM_THRESHOLD_BYTES = 2**31 - 1  #: never give the heap's top back to the OS
_held: str | None = None


def hold_freed_memory() -> str:
    """Keep the process's freed heap memory for reuse instead of giving it back to the OS.

    glibc: allocations up to 32 MiB come from the heap (``M_MMAP_THRESHOLD``) and the heap is never
    trimmed (``M_TRIM_THRESHOLD``), so a pass that frees and re-allocates the same tensors faults no
    pages in. Set once per process (later calls return the same note); elsewhere (another C library,
    no ``mallopt``) nothing changes. Returns what was done, for a profile's measurement record.
    """
    global _held
    if _held is None:
        try:
            import ctypes

            libc = ctypes.CDLL("libc.so.6")
            ok = (libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES) == 1
                  and libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD_BYTES) == 1)
        except (OSError, AttributeError):
            ok = False
        _held = ("glibc malloc: mmap threshold 32 MiB, no trim (freed memory kept for reuse)" if ok
                 else "allocator defaults (glibc mallopt not available)")
    return _held


def _switches() -> int:
    """Involuntary context switches of the calling thread so far (0 where the OS does not count them)."""
    return resource.getrusage(_RUSAGE_THREAD).ru_nivcsw if _RUSAGE_THREAD is not None else 0


class ThreadCpuTimer:
    """Seconds of the calling thread's CPU time spent in ``fn`` (``time.thread_time``)."""

    device = "cpu"
    method = "thread CPU time (time.thread_time)"

    def __init__(self) -> None:
        self.allocator = hold_freed_memory()

    def time(self, fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
        """Run ``fn(*args)``; returns (its result, CPU seconds of this thread)."""
        c0 = time.thread_time()
        out = fn(*args)
        return out, time.thread_time() - c0

    @staticmethod
    def switch_count() -> int:
        """Involuntary context switches of the calling thread so far (0 where the OS does not count them)."""
        return _switches()


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

    @staticmethod
    def switch_count() -> int:
        """0: GPU time does not depend on the host thread being switched out."""
        return 0


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
