"""Checking an answer against its sources: does each cited source support the claim citing it?

`attribution` keeps what a source supports and declines what none does; `lexicon` and
`questions` read what a sentence asserts and what a question asks, for the offline lexical
verifier; `visual` asks a judge that sees an image source's pixels.
"""
