"""The public data sets (traces too large to ship in the package): where they are, how to get them.

* :mod:`raytestbed.data.catalogue`: every data set the loaders know (``catalogue.json``, package
  data): its files with origin URL, size (bytes) and sha256, its licence;
* :mod:`raytestbed.data.store`: the data folder and the look-up of a data file
  (``$RAYTESTBED_DATA_DIR``, else a per-user folder; a ``shared/data`` folder above the working
  directory is a developer fallback); a missing file names its data set and the command that gets it;
* :mod:`raytestbed.data.fetch`: ``raytestbed data fetch NAME`` (download, check, atomic rename) and
  ``verify``; :mod:`raytestbed.data.commands`: the ``raytestbed data`` command.
"""

from raytestbed.data.store import ENV_VAR, data_dirs, data_file, fetch_dir, find_data_dir, user_data_dir

__all__ = ["ENV_VAR", "data_dirs", "data_file", "fetch_dir", "find_data_dir", "user_data_dir"]
