"""User-facing errors.

Anything a user can cause with bad input (a config, a trace row, a CLI flag)
raises a :class:`RaytestbedError` whose message names the place and the reason
in one line; the CLI prints it and exits with status 2.
"""


class RaytestbedError(Exception):
    """Base class of errors caused by user input; message is one line."""


class ConfigError(RaytestbedError):
    """A cluster or trial configuration is invalid."""


class TraceError(RaytestbedError):
    """A trace or workload row is invalid."""


class DataError(RaytestbedError):
    """A data set cannot be fetched, or a fetched file is not the one the catalogue records."""


class PolicyError(RaytestbedError):
    """A policy is unknown or returned an invalid decision."""


class ServerLostError(RuntimeError):
    """An emulated server was lost (killed or died): its GPUs and hosts cannot be used."""


class PluginError(RaytestbedError):
    """A policy or workload kind from outside the package cannot be loaded or is not what it must be."""
