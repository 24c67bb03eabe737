"""mmrag: indexes."""
