"""Benchmark: `raytestbed bench gadget [options]` (code: raytestbed/experiments/benches/gadget.py; results: docs/benchmarks.md).

    .venv/bin/python scripts/bench_gadget.py [options]
"""

import sys

from raytestbed.experiments.benches.gadget import main

if __name__ == "__main__":
    sys.exit(main())
