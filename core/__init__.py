"""The core every front end shares: the QA pipeline, its settings and the factory that builds
its parts, plus the command-line flags derived from those settings.

The CLI, the HTTP service and the eval runs import this; it imports `indexes`, `retrieval` and
`generation`, and nothing that imports it.
"""
