"""The files raytestbed ships: example trials, sweeps, model files, profiles, trace slices, clusters.

In an installed wheel they live in this package, as ``workloads/`` and ``cluster_configs/``
(the build maps the source tree's top-level folders of those names into
``raytestbed.bundled``: ``setup.py``). In a source checkout (an editable install, or the
source folder on ``PYTHONPATH``) they stay at the repository's root. Code never looks here
directly: :mod:`raytestbed.resources` finds them either way.
"""
