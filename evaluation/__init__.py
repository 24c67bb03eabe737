"""mmrag: evaluation on public benchmarks (WebQA, A-OKVQA, ST-VQA, Toloka VQA, VLQA).

- `evaluation.loaders`: release files and official prediction formats, one module per benchmark;
- `evaluation.metrics`: the official metrics as pure functions (WebQA Acc/FL/retrieval F1,
  A-OKVQA MC/DA and rationale BLEU/METEOR, ST-VQA ANLS, Toloka IoU, VLQA accuracy);
- `evaluation.scoring`: gold joined to predictions, aggregated as the leaderboards report;
- `evaluation.runs`: `mmrag eval run BENCH`, mmrag answering a benchmark, scored and reported;
- `evaluation.cli`: `mmrag eval score BENCH --gold FILE --pred FILE` and `eval run`.
"""
