"""The core every front end shares: the QA pipeline, its settings and the factory that builds
its parts, plus the command-line flags derived from those settings.

The CLI, the HTTP service and the eval runs import this; it imports `indexes`, `retrieval` and
`generation`, and nothing that imports it.
"""

__all__ = ["Conversation", "OpenIndex", "open_index"]


def __getattr__(name: str) -> object:
    """`from mmrag.core import open_index` (the Python API, `core.api`), imported on first use:
    every command imports `mmrag.core.settings`, and most never need the pipeline's modules."""
    if name in __all__:
        from mmrag.core import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
