"""Unit conversions, applied only at the config boundary (DESIGN principle 3).

Internally every rate is bytes/s, every size bytes and every duration seconds.
"""

GBPS = 1e9 / 8  #: one gigabit per second in bytes/s (10 Gbps = 1.25e9 B/s)
GBYTES_PER_S = 1e9  #: one gigabyte per second in bytes/s (300 GB/s = 3e11 B/s)
MB = 1e6  #: one megabyte (decimal) in bytes, as the papers use it


def gbps_to_bytes_per_s(gbps: float) -> float:
    """Convert gigabits per second to bytes per second."""
    return gbps * GBPS


def gbytes_per_s_to_bytes_per_s(gbs: float) -> float:
    """Convert gigabytes per second to bytes per second."""
    return gbs * GBYTES_PER_S
