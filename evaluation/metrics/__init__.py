"""Official metrics of the supported benchmarks, as pure functions over strings and numbers.

Each module reproduces one benchmark's official definition, quirks included, and is unit-tested
on hand-worked cases; joining gold to predictions is `evaluation.scoring`'s job.
"""
