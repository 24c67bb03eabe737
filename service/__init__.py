"""mmrag: service."""
