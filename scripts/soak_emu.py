"""Soak check: `raytestbed bench soak-emu [options]` (code: benchmarks/soak_emu.py).

One emulated hour with faults (workloads/trials/soak_1h.yaml), memory over time, nothing lost.

    python scripts/soak_emu.py [--out DIR] [--every 5] [--warmup 0.2]
"""

import sys

from raytestbed.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "soak-emu", *sys.argv[1:]]))
