"""Errors that mean the user's input is wrong, not that mmrag has a bug.

Front ends print these as one line; anything else is a bug and keeps its traceback.
"""


class InputError(ValueError):
    """Bad user input: a missing file, a malformed record, an incompatible index."""


class CorpusError(InputError):
    """A corpus file that cannot be read as the format it claims to be."""


class IndexFormatError(InputError):
    """An index directory that is missing, incomplete, corrupt or from an incompatible version."""
