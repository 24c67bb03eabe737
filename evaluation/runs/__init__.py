"""`mmrag eval run BENCH`: run mmrag over a benchmark, write the official prediction file, score it.

- `cli`: the `eval run webqa|aokvqa` parsers; `webqa_command`, `aokvqa_command`: their steps;
- `checkpoint`: the resumable `OUT.partial.jsonl` both runs append to, one question a line;
- `loop`: the question loop (progress bar, Ctrl-C note) shared by the runs;
- `webqa`, `aokvqa`: one question's prediction, from the QA pipeline / the rationale writer;
- `webqa_scores`: WebQA scored overall and per query type (image / text queries);
- `baselines`: the published numbers of the benchmark spec, with the setting they belong to;
- `charts`, `markdown`, `webqa_report`, `aokvqa_report`: the report written beside OUT;
- `command`: option checks and warnings both commands share.

Scoring goes through `evaluation.scoring` on the prediction file as written, exactly as
`mmrag eval score` reads it, so the two commands cannot disagree.
"""
