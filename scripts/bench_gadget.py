"""Benchmark: `raytestbed bench gadget [options]` (code: benchmarks/gadget.py; results: docs/benchmarks.md).

    .venv/bin/python scripts/bench_gadget.py [options]
"""

import sys

from raytestbed.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "gadget", *sys.argv[1:]]))
