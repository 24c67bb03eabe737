"""`mmrag eval run BENCH`: run mmrag over a benchmark, write the official prediction file, score
it and write a report beside it.

- `webqa`, `aokvqa`: one module per benchmark: its parser, one question's prediction, the
  run's steps and its report;
- `checkpoint`: the resumable `OUT.partial.jsonl`, the question loop and the option checks
  every run shares;
- `report`: Markdown tables, bar charts and the published baselines the reports are built of.

Scoring goes through `mmrag.evaluation.scoring` on the prediction file as written, exactly as
`mmrag eval score` reads it, so the two commands cannot disagree.
"""
