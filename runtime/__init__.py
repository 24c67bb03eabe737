"""What every part shares while it works for one request: its deadline (`runtime.deadline`).

The bottom layer: it imports nothing of mmrag, and every other part may import it, so that
the reading of a text (generation), OCR (indexes) and the pipeline (core) check one deadline.
"""
