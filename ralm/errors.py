"""One exception type for bad input: the CLI prints its message on one line and exits non-zero.

Raise it with the file and line or field in the message, e.g.
``RalmInputError(f"{path}:{lineno}: missing field 'text'")``. Anything else is a bug and keeps its traceback.
"""


class RalmInputError(ValueError):
    """Bad user input (files, options, indexes). The message names the file and line or field."""
