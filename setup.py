"""Build configuration that pyproject.toml cannot express: the shipped data folders as package data.

The top-level ``workloads/`` (example trials, sweeps, model files, profiles, trace slices) and
``cluster_configs/`` folders go into the wheel as ``raytestbed/bundled/workloads/`` and
``raytestbed/bundled/cluster_configs/`` (a ``package_dir`` mapping), where
:mod:`raytestbed.resources` finds them through ``importlib.resources``; a source checkout reads
them where they are. Everything else is in pyproject.toml.
"""

from setuptools import find_namespace_packages, find_packages, setup

BUNDLED = {"raytestbed.bundled.workloads": "workloads", "raytestbed.bundled.cluster_configs": "cluster_configs"}
DATA = ["*.yaml", "*.yml", "*.json", "*.jsonl", "*.csv", "*.gz", "*.txt", "*.md", "*.py"]  # what the folders hold

packages = find_packages(include=["raytestbed", "raytestbed.*"])
package_dir = dict(BUNDLED)
for pkg, folder in BUNDLED.items():
    # every subfolder is a (data-only) package of its own, so that its files are copied
    packages += [pkg] + [f"{pkg}.{sub}" for sub in find_namespace_packages(where=folder, exclude=["*__pycache__*"])]

package_data = {pkg: DATA for pkg in packages if pkg.startswith("raytestbed.bundled.")}
package_data["raytestbed.data"] = ["catalogue.json"]  # the data-set catalogue (raytestbed/data/catalogue.py)

setup(packages=packages, package_dir=package_dir, package_data=package_data)
