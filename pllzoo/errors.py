"""The one exception type the CLI turns into a one-line error.

Library code raises :class:`PLLZooError` for anything a user can fix (bad input,
unknown names, incompatible recipes); the CLI prints ``Error: <message>`` and
exits non-zero without a traceback.  Programming errors stay ordinary exceptions.
"""


class PLLZooError(Exception):
    """A user-facing error with a one-line message."""


class UsageError(PLLZooError):
    """A usage error: exit status 2, as click gives a bad command-line value (e.g. the same value in a config file)."""


class UnknownNameError(UsageError):
    """An unknown method, component, dataset or hyper-parameter name (a usage error)."""
