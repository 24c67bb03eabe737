"""`mmrag serve`: the HTTP API with uvicorn."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser("serve", help="start the HTTP service")
    serve.add_argument("--index", type=Path, help="index directory (default: settings)")
    serve.add_argument("--host", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8000)")
    serve.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from indexes.collection import Collection
    from service.app import create_app
    from service.config import Settings

    overrides = {k: v for k, v in vars(args).items() if k in ("index", "host", "port") and v}
    settings = Settings(**overrides)
    Collection(settings.index)  # fail here with a one-line error, before uvicorn starts
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level="info")
    return 0
