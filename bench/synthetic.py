"""A synthetic corpus with WebQA's shape, for benchmarks at full scale without the 51 GB release.

WebQA's full-retrieval collection is ~390K images (captions ~13 tokens) and ~540K snippets
(~45 tokens), titles ~3 tokens. Words follow a Zipf law over a 200K-word vocabulary of
pronounceable pseudo-words; everything is drawn with numpy from one seed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

IMAGE_SHARE = 390 / 930
VOCAB = 200_000
ZIPF_S = 1.07
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def vocabulary(size: int = VOCAB) -> np.ndarray:
    """Distinct words of 2-4 syllables, rank 0 the most frequent."""
    words, n = [], len(SYLLABLES)
    for rank in range(size):
        parts, value = [], rank + n
        while value:
            value, digit = divmod(value, n)
            parts.append(SYLLABLES[digit])
        words.append("".join(parts))
    return np.array(words)


def zipf_sampler(rng: np.random.Generator, size: int = VOCAB, s: float = ZIPF_S):
    cumulative = np.cumsum(1.0 / np.arange(1, size + 1) ** s)
    cumulative /= cumulative[-1]
    return lambda count: np.searchsorted(cumulative, rng.random(count))


def write_corpus(path: Path, n: int, seed: int = 0) -> Path:
    """JSONL corpus (mmrag's own format) of n sources; image sources point at no real file."""
    rng = np.random.default_rng(seed)
    words = vocabulary()
    draw = zipf_sampler(rng)
    n_images = round(n * IMAGE_SHARE)
    modalities = np.where(np.arange(n) < n_images, "image", "text")
    rng.shuffle(modalities)
    body_lengths = np.where(
        modalities == "image",
        rng.poisson(13, n).clip(3, None),
        rng.poisson(45, n).clip(8, None),
    )
    title_lengths = rng.integers(1, 6, n)
    tokens = words[draw(int(body_lengths.sum() + title_lengths.sum()))]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    position = 0
    with tmp.open("w") as handle:
        for i in range(n):
            title = " ".join(tokens[position : position + title_lengths[i]])
            position += title_lengths[i]
            body = " ".join(tokens[position : position + body_lengths[i]])
            position += body_lengths[i]
            record = {"id": f"s{i}", "modality": str(modalities[i]), "title": title, "text": body}
            if modalities[i] == "image":
                record["image"] = f"images/{i}.jpg"
            handle.write(json.dumps(record) + "\n")
    tmp.replace(path)
    return path


def queries(n: int, seed: int = 1, length: int = 8, skip_top: int = 100) -> list[str]:
    """Queries of content words: the `skip_top` most frequent words play the stopwords' part."""
    rng = np.random.default_rng(seed)
    words = vocabulary()
    draw = zipf_sampler(rng)
    picked = []
    for _ in range(n):
        ranks = draw(length * 4)
        ranks = ranks[ranks >= skip_top][:length]
        picked.append(" ".join(words[ranks]))
    return picked
