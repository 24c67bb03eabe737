"""mmrag: generation.reading — a text read once (spaCy), and a question read once into what it asks.

Shared by every stage that looks inside a sentence: the conversation resolver (core), prompts,
selection of the answering statement, grounding and verification (generation).
"""
