"""mmrag: evaluation."""
