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


class PolicyFault(PolicyError):
    """A policy failed during a run: it raised, returned something other than a list of decisions, or
    made a decision the backend cannot apply.

    The message is one line naming the policy, the event (kind, time, job) and the problem. The
    original exception is chained (``__cause__``) where there was one; ``detail`` holds its formatted
    traceback as text, which survives the trip out of the emulator's clock actor (``--debug`` prints it).
    """

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail

    def __reduce__(self):  # pickled across Ray with its traceback text
        return (type(self), (str(self), self.detail))


class ServerLostError(RuntimeError):
    """An emulated server was lost (killed or died): its GPUs and hosts cannot be used."""


class PluginError(RaytestbedError):
    """A policy or workload kind from outside the package cannot be loaded or is not what it must be."""
