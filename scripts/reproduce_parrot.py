"""Reproduce the parrot paper's figures: `raytestbed reproduce parrot [--fig N] [--quick] [--out DIR]`.

The figures are sweep definitions in raytestbed/experiments/papers/parrot.py; this file only
forwards its arguments to the CLI; OUT/reproduction.md puts the paper beside ours.

    .venv/bin/python scripts/reproduce_parrot.py [--fig N] [--quick] [--out DIR] [--address HOST:6379]
"""

import sys

from raytestbed.cli import main

if __name__ == "__main__":
    sys.exit(main(["reproduce", "parrot", *sys.argv[1:]]))
