"""Rationale generation metrics for A-OKVQA: corpus SacreBLEU and mean sentence METEOR.

METEOR here is nltk's implementation (exact stage, then Porter-stem stage, then the WordNet
synonym stage; alpha 0.9, beta 3, gamma 0.5; the best reference of each question) with the
synonym stage *empty*: nltk needs WordNet data that cannot be downloaded on these machines and
no PyPI package ships it. Scores are therefore exact+stem METEOR, a little lower than METEOR with
synonyms (e.g. the paper's ClipCap 0.271 was computed with them). Tokens are lower-cased
whitespace tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any


class _NoSynonyms:
    """Stands in for nltk's WordNet reader: every word has no synsets."""

    def synsets(self, word: str, *args: Any, **kwargs: Any) -> list[Any]:
        return []


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer()


def meteor(hypothesis: str, references: Sequence[str]) -> float:
    """METEOR (exact + stem matching, no synonyms) of one hypothesis against its references."""
    from nltk.translate.meteor_score import meteor_score

    refs = [ref.split() for ref in references if ref.split()]
    if not refs:
        raise ValueError("METEOR needs at least one non-empty reference")
    return float(
        meteor_score(
            refs,
            hypothesis.split(),
            preprocess=str.lower,
            stemmer=_stemmer(),
            wordnet=_NoSynonyms(),
            alpha=0.9,
            beta=3.0,
            gamma=0.5,
        )
    )


def mean_meteor(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> float:
    """Mean over questions of each hypothesis's METEOR against its references (0..1)."""
    if len(hypotheses) != len(references) or not hypotheses:
        raise ValueError("need as many reference lists as hypotheses, at least one")
    scores = [meteor(hyp, refs) for hyp, refs in zip(hypotheses, references, strict=True)]
    return sum(scores) / len(scores)


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> float:
    """SacreBLEU (default 13a tokenisation) over the corpus, 0..100.

    Questions may have different numbers of references; missing ones are passed as None, which
    sacrebleu ignores.
    """
    import sacrebleu

    if len(hypotheses) != len(references) or not hypotheses:
        raise ValueError("need as many reference lists as hypotheses, at least one")
    width = max(len(refs) for refs in references)
    streams = [[refs[k] if k < len(refs) else None for refs in references] for k in range(width)]
    return float(sacrebleu.corpus_bleu(list(hypotheses), streams).score)
