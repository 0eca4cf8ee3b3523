"""Experiments as part of the library: sweeps (trials x grid x policies x seeds) run as Ray tasks,
and the papers' figures as sweep definitions (``raytestbed sweep``, ``raytestbed reproduce``).

* :mod:`~raytestbed.experiments.spec`: the sweep file and its cells;
* :mod:`~raytestbed.experiments.cell`: one cell through :func:`raytestbed.trial.run_into`;
* :mod:`~raytestbed.experiments.runner`: Ray / serial execution, resume, progress;
* :mod:`~raytestbed.experiments.tables`: ``sweep.csv``, mean and 95 % CI, plots, report;
* :mod:`~raytestbed.experiments.papers`: each paper's figures as sweeps, with their claims;
* :mod:`~raytestbed.experiments.reproduce`: ``raytestbed reproduce PAPER`` over those figures;
* :mod:`~raytestbed.experiments.results_doc`: the claims page ``docs/results.md``;
* the benchmarks and one-off studies behind ``raytestbed bench NAME`` are not part of the package: they
  live in the source tree's ``benchmarks/`` folder.
"""

from raytestbed.experiments.runner import SweepRun, run_sweep
from raytestbed.experiments.spec import Axis, Cell, PolicySpec, Sweep, load_sweep

__all__ = ["Axis", "Cell", "PolicySpec", "Sweep", "SweepRun", "load_sweep", "run_sweep"]
