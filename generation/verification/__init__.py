"""Checking an answer against its sources: does each cited source support the claim citing it?

One concept a module: `reading` reads a text once (spaCy: sentences, lemmas, parts of speech,
noun phrases, entities, numbers, negations, superlatives); `questions` says what a question
asks; `attributes` which colour a sentence gives which thing; `grounding` finds what a claim
says that its sources do not; `verifier` scores a source's support for a claim (lexical or
NLI); `extraction` finds the source's own sentence that answers; `attribution` is the policy
that keeps, cuts, replaces or declines.
"""
