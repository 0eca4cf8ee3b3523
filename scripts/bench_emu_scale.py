"""Benchmark: `raytestbed bench emu-scale [options]` (code: benchmarks/emu_scale.py).

The emulator at scale on this host: 64 emulated GPUs in replay (workloads/trials/parity_realistic.yaml),
16 computing real PyTorch at once (workloads/trials/scale_real16.yaml, together and one at a time).

    python scripts/bench_emu_scale.py [--out DIR] [--skip-replay] [--skip-real]
"""

import sys

from raytestbed.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "emu-scale", *sys.argv[1:]]))
