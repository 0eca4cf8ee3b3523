"""Where the loaders find the public traces: :mod:`raytestbed.data.store` (the data folder, the
look-up of a file, the error that names the data set and ``raytestbed data fetch NAME``)."""

from raytestbed.data.store import ENV_VAR, data_dirs, data_file, find_data_dir

__all__ = ["ENV_VAR", "data_dirs", "data_file", "find_data_dir"]
