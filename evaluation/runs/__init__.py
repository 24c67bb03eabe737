"""`mmrag eval run BENCH`: run mmrag over a benchmark, write the official prediction file, score
it and write a report beside it.

- `driver`: what every run does, whatever the benchmark: options, image checks, checkpoint,
  the question loop here or on Ray, scoring, the report's skeleton and the summary line;
- `spec`: `Benchmark`, what a benchmark brings to the driver, and `RunInfo`;
- one spec module per benchmark (`webqa`, `aokvqa`, `stvqa`, `toloka`, `vlqa`), each with a
  `<bench>_runner` module: what answers one question, here or on a Ray worker (and
  `webqa_report`, the WebQA report's own tables and charts);
- `checkpoint`: the resumable `OUT.partial.jsonl`, the question loop and the options every run
  takes; `cluster`: questions answered on a Ray cluster;
- `report`: Markdown tables, bar charts and the published baselines the reports are built of.

Scoring goes through `mmrag.evaluation.scoring` on the prediction file as written, exactly as
`mmrag eval score` reads it, so the two commands cannot disagree.
"""
