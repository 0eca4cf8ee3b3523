"""Benchmark the emulator's fabric: achieved vs configured bandwidth, weighted shares, overhead, start-up.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_fabric.py [--quick] [--reps 2] [--skip-startup]
    raytestbed bench fabric [--quick]

The code lives in raytestbed/emu/bench.py (so the CLI can run it); results: docs/benchmarks.md.
"""

import sys

from raytestbed.emu.bench import main

if __name__ == "__main__":
    sys.exit(main())
