"""The one error generation raises for problems a user can fix.

A bad engine name, a model that cannot be found or loaded, a missing optional package, an
endpoint that does not answer: each becomes a `GenerationError` whose message is one line naming
the engine or model and what to install or pass, so front ends print it without a traceback.
It subclasses ValueError, as `indexes.errors.InputError` does, without importing `indexes`:
generation stands alone.
"""


class GenerationError(ValueError):
    """A generation engine or model that cannot be used as configured."""


class GenerationCancelled(GenerationError):
    """An engine stopped because its caller no longer wants the reply (a deadline passed, a
    client went away): the caller knows why, and the engine is free for the next question."""


class NoLogprobs(GenerationError):
    """A server that answers but gives no token probabilities: a judge then reads its reply."""
