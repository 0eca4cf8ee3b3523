"""Time scale of the emulated cluster: emulated seconds vs wall seconds.

``factor`` is the number of **emulated seconds per wall second** (the
contract of ``EMU_CONTRACT.md``): ``factor = 10`` runs the emulated cluster
ten times faster than the wall clock, ``factor = 0.001`` runs it 1000 times
slower.  The latter is the *time-dilation factor* (TDF) of the design notes,
``TDF = 1 / factor`` (wall seconds per emulated second):

    emulated_s = wall_s * factor = wall_s / TDF
    wall link rate (bytes/s) = configured rate (bytes/s) * factor

Configs state real-world bandwidths (a 10 Gbit/s NIC is 1.25e9 bytes/s); on
this host a paced transfer is accurate (within 5 %) only at wall rates of
about <= 100 MB/s lasting >= ~150 ms (``notes/host-measurements.md`` §4), so
:func:`suggest_factor` picks the largest factor that keeps every link below
that wall rate and :func:`check_links` reports links the host cannot honour.

The clock is ``time.time()`` (one source for every process and node, so a
``TimeScale`` pickled into an actor keeps the driver's epoch).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from raytestbed.errors import ConfigError

#: Wall rate (bytes/s) up to which the paced fabric stays within ~5 % (host-measurements §4a).
ACCURATE_WALL_BPS = 100e6
#: Wall rate (bytes/s) beyond which pacing falls apart (~0.9 at 1 GB/s, ~0.4 at 10 GB/s, §4a).
MAX_WALL_BPS = 1e9


@dataclass
class TimeScale:
    """Emulated seconds per wall second, and an emulated clock.

    Attributes:
        factor: emulated seconds per wall second (> 0, finite).
        epoch: wall time (``time.time()``, seconds) at which the emulated clock reads 0.
    """

    factor: float = 1.0
    epoch: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        f = float(self.factor)
        if not (math.isfinite(f) and f > 0):
            raise ConfigError(f"time_scale: factor must be a finite number > 0 (emulated s per wall s), got {self.factor!r}")
        self.factor = f

    @classmethod
    def from_tdf(cls, tdf: float) -> "TimeScale":
        """A time scale from a time-dilation factor (wall seconds per emulated second)."""
        t = float(tdf)
        if not (math.isfinite(t) and t > 0):
            raise ConfigError(f"time_scale: TDF must be a finite number > 0, got {tdf!r}")
        return cls(1.0 / t)

    @property
    def tdf(self) -> float:
        """Time-dilation factor: wall seconds per emulated second (= 1 / factor)."""
        return 1.0 / self.factor

    def to_wall(self, emu_s: float) -> float:
        """Wall seconds that ``emu_s`` emulated seconds take."""
        return emu_s / self.factor

    def to_emu(self, wall_s: float) -> float:
        """Emulated seconds that ``wall_s`` wall seconds represent."""
        return wall_s * self.factor

    def wall_rate(self, emu_bps: float) -> float:
        """Wall bytes/s of a link configured at ``emu_bps`` emulated bytes/s."""
        return emu_bps * self.factor

    def now(self) -> float:
        """Emulated seconds since the epoch."""
        return (time.time() - self.epoch) * self.factor

    def restart(self) -> None:
        """Set the emulated clock back to 0 now."""
        self.epoch = time.time()

    def rescaled(self, factor: float) -> "TimeScale":
        """A time scale with a new factor whose clock continues from this one's ``now()``."""
        wall = time.time()
        emu_now = (wall - self.epoch) * self.factor
        new = TimeScale(factor)
        new.epoch = wall - emu_now / new.factor
        return new


def _link_rates(cluster) -> dict[str, float]:
    """Every configured rate (bytes/s) of ``cluster`` by a readable name; intra-server last."""
    out: dict[str, float] = {}
    for link, bps in cluster.link_capacities().items():
        out[f"{link[0]} {link[1]}"] = float(bps)
    out["intra-server"] = float(cluster.intra_bps)
    return out


#: Wall seconds a paced message should last to stay within ~5 % of its rate: the fixed cost is
#: ~5-10 ms on an idle host (host-measurements §4a: >= 0.15 s) and 15-20 ms under load, so 0.3 s.
MIN_MESSAGE_WALL_S = 0.3


def suggest_factor(cluster, *, wall_bps: float = ACCURATE_WALL_BPS, include_intra: bool = False,
                   min_message_bytes: float | None = None) -> float:
    """Largest factor that keeps every NIC/rack link (and optionally intra-server) at <= ``wall_bps`` wall.

    With ``min_message_bytes`` the wall rate is also capped at ``min_message_bytes /
    MIN_MESSAGE_WALL_S`` so that the smallest message of the workload lasts >= 0.3 s of wall
    time on the fastest link (the per-message floor, 5-20 ms, is then <= 5 %).  Never above 1 (the emulated cluster does not run faster than real time).

    Intra-server links (NVLink: 300 GB/s) are left out by default: they are ~100x faster than
    NICs, and a factor that paces them accurately makes NIC transfers very slow in wall time;
    use the fabric's virtual-time mode for such clusters (docs/emulator.md).
    """
    rates = _link_rates(cluster)
    if not include_intra:
        rates.pop("intra-server")
    if min_message_bytes is not None:
        if not min_message_bytes > 0:
            raise ConfigError(f"time_scale: min_message_bytes must be > 0, got {min_message_bytes!r}")
        wall_bps = min(wall_bps, min_message_bytes / MIN_MESSAGE_WALL_S)
    return min(1.0, wall_bps / max(rates.values()))


def check_links(cluster, scale: TimeScale) -> tuple[list[str], list[str]]:
    """Links the host cannot pace at this time scale: ``(inaccurate, unusable)`` descriptions.

    ``inaccurate``: wall rate above :data:`ACCURATE_WALL_BPS` (pacing error > ~5 %);
    ``unusable``: above :data:`MAX_WALL_BPS` (Ray cannot move bytes that fast here).
    """
    inaccurate, unusable = [], []
    for name, bps in _link_rates(cluster).items():
        wall = scale.wall_rate(bps)
        msg = f"{name}: {bps / 1e6:.6g} MB/s emulated = {wall / 1e6:.6g} MB/s wall"
        if wall > MAX_WALL_BPS:
            unusable.append(msg)
        elif wall > ACCURATE_WALL_BPS:
            inaccurate.append(msg)
    return inaccurate, unusable
