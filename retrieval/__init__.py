"""mmrag: retrieval."""
