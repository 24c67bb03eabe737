"""Readers for each benchmark's release files and official prediction formats.

One module per benchmark; each raises `evaluation.errors.DatasetError` (an `InputError`) naming
the file and the record for real corruption, and tolerates the release's known quirks.
"""
