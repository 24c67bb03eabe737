"""One module per `mmrag` sub-command, each exposing `register(subparsers)`."""
