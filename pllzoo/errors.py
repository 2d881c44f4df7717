"""The one exception type the CLI turns into a one-line error.

Library code raises :class:`PLLZooError` for anything a user can fix (bad input,
unknown names, incompatible recipes); the CLI prints ``Error: <message>`` and
exits non-zero without a traceback.  Programming errors stay ordinary exceptions.
"""


class PLLZooError(Exception):
    """A user-facing error with a one-line message."""


class UnknownNameError(PLLZooError):
    """An unknown method, component, dataset or hyper-parameter name (a usage error)."""
