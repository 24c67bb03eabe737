"""mmrag: generation."""
