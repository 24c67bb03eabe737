"""`mmrag serve`: the HTTP API with uvicorn."""

from __future__ import annotations

import argparse
from pathlib import Path

from service.commands.options import add_pipeline_options, settings_from


def register(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser("serve", help="start the HTTP service")
    serve.add_argument("--index", type=Path, help="index directory (default: settings)")
    serve.add_argument("--host", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8000)")
    add_pipeline_options(serve)
    serve.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from service.app import create_app
    from service.components import build_pipeline

    settings = settings_from(args)
    # Build once up front: bad settings fail here as one line, before uvicorn starts.
    pipeline = build_pipeline(settings)
    uvicorn.run(
        create_app(settings, pipeline), host=settings.host, port=settings.port, log_level="info"
    )
    return 0
