"""WebQA fluency (FL): BARTScore of the answer against each reference, normalised by the
reference's BARTScore against itself, capped at 1, best reference taken.

    FL(c, R) = max_{r in R} min(1, BARTScore(r, c) / BARTScore(r, r))
    BARTScore(r, c) = exp(mean over c's tokens of log p(token | r, previous tokens))

Both strings first get the official light normalisation (punctuation removed, whitespace
collapsed). The official run uses `facebook/bart-large-cnn` with ParaBank-finetuned weights
(`bart.pth` from the BARTScore project); any BART-like seq2seq checkpoint can be given by hub
name or local directory. Target tokens are scored as BARTScore does: the tokenizer's full
encoding (<s> ... </s>) as labels, the decoder fed the labels shifted right, padding ignored.

`fluency_scores` is a pure function of a `LogLikelihood` callable, so it is tested with a fake
as well as with a tiny random BART; `BartLogLikelihood` is the real one.
"""

from __future__ import annotations

import math
import os
import socket
import string
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from mmrag.evaluation.errors import EvaluationError

DEFAULT_FL_MODEL = "facebook/bart-large-cnn"

# (source, target) pairs -> mean token log-likelihood of each target given its source.
LogLikelihood = Callable[[Sequence[tuple[str, str]]], list[float]]

_PUNCTUATION_TABLE = str.maketrans(dict.fromkeys(string.punctuation))


def light_normalize(text: str) -> str:
    """Official `normalize_text_for_bart`: punctuation removed, whitespace collapsed."""
    return " ".join(text.translate(_PUNCTUATION_TABLE).split())


def fluency_scores(
    candidates: Sequence[str],
    references: Sequence[Sequence[str]],
    log_likelihood: LogLikelihood,
) -> list[float | None]:
    """FL per question; None where a question has no reference answer.

    Every distinct (reference, text) pair is scored once, so BARTScore(r, c) for c == r is the
    very number used as the normaliser and FL(c, [c]) is exactly 1. The ratio is computed as
    exp(ll(r, c) - ll(r, r)), equal to the official exp(ll(r, c)) / exp(ll(r, r)) but free of
    underflow for long answers.
    """
    if len(candidates) != len(references):
        raise ValueError("candidates and references differ in length")
    normalized_c = [light_normalize(c) for c in candidates]
    normalized_r = [[light_normalize(r) for r in refs] for refs in references]
    pairs: dict[tuple[str, str], int] = {}
    for candidate, refs in zip(normalized_c, normalized_r, strict=True):
        for ref in refs:
            pairs.setdefault((ref, candidate), len(pairs))
            pairs.setdefault((ref, ref), len(pairs))
    scores = log_likelihood(list(pairs)) if pairs else []
    if len(scores) != len(pairs):
        raise RuntimeError("the log-likelihood function returned a wrong number of scores")
    results: list[float | None] = []
    for candidate, refs in zip(normalized_c, normalized_r, strict=True):
        if not refs:
            results.append(None)
            continue
        ratios = (
            math.exp(scores[pairs[(ref, candidate)]] - scores[pairs[(ref, ref)]]) for ref in refs
        )
        results.append(max(min(1.0, ratio) for ratio in ratios))
    return results


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~")) or name.count("/") > 1 or "\\" in name


def _hub_unreachable() -> str | None:
    """Why the model hub cannot be reached, or None. A DNS lookup only: without it, an offline
    machine spends about a minute in huggingface_hub's retries before failing."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}:
        return "HF_HUB_OFFLINE is set"
    from huggingface_hub import constants

    host = urlparse(constants.ENDPOINT).hostname or ""
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return f"{host} cannot be resolved (no network?)"
    return None


def _load(name: str, tokenizer_class: Any, model_class: Any) -> tuple[Any, Any]:
    """Tokenizer and model from a local directory, the local hub cache, or else the hub."""
    if Path(name).is_dir():
        return tokenizer_class.from_pretrained(name), model_class.from_pretrained(name)
    try:
        return (
            tokenizer_class.from_pretrained(name, local_files_only=True),
            model_class.from_pretrained(name, local_files_only=True),
        )
    except OSError:
        if (reason := _hub_unreachable()) is not None:
            raise OSError(f"not in the local Hugging Face cache and {reason}") from None
    return tokenizer_class.from_pretrained(name), model_class.from_pretrained(name)


class BartLogLikelihood:
    """Mean token log-likelihood of targets given sources under a seq2seq model (BARTScore).

    `model` is a hub name or a local directory holding the model and its tokenizer (as written
    by `save_pretrained`); a local directory loads without any network access.
    """

    def __init__(
        self,
        model: str | Path = DEFAULT_FL_MODEL,
        *,
        batch_size: int = 16,
        device: str | None = None,
        max_length: int = 1024,
    ) -> None:
        if batch_size < 1:
            raise EvaluationError(f"FL batch size must be at least 1, got {batch_size}")
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        name = str(model)
        local = Path(name).expanduser()
        if local.exists():
            if not local.is_dir():
                raise EvaluationError(f"FL model {name}: not a directory")
            name = str(local)
        elif _looks_like_path(name):
            raise EvaluationError(f"FL model {name}: no such directory")
        try:
            self.tokenizer, self.model = _load(name, AutoTokenizer, AutoModelForSeq2SeqLM)
        except (OSError, ValueError, KeyError) as exc:
            reason = " ".join(str(exc).split())[:300]
            raise EvaluationError(
                f"cannot load FL model {name!r} ({reason}); give a local model directory "
                "with --fl-model, or skip fluency with --no-fl"
            ) from None
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device).eval()
        positions = getattr(self.model.config, "max_position_embeddings", None) or max_length
        self.max_length = min(max_length, positions)
        self.batch_size = batch_size
        start = self.model.config.decoder_start_token_id
        self.decoder_start = start if start is not None else self.model.config.eos_token_id

    def _encode(self, texts: list[str]) -> Any:
        return self.tokenizer(
            texts,
            max_length=self.max_length,
            truncation=True,
            padding=True,
            return_tensors="pt",
        ).to(self.device)

    def __call__(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        import torch

        # Longest first, so each batch pads little; results go back in the caller's order.
        order = sorted(range(len(pairs)), key=lambda i: -len(pairs[i][0]) - len(pairs[i][1]))
        scores = [0.0] * len(pairs)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                sources = self._encode([pairs[i][0] for i in batch])
                targets = self._encode([pairs[i][1] for i in batch])
                labels = targets["input_ids"]
                decoder_input = labels.new_full(labels.shape, self.decoder_start)
                decoder_input[:, 1:] = labels[:, :-1]
                logits = self.model(
                    input_ids=sources["input_ids"],
                    attention_mask=sources["attention_mask"],
                    decoder_input_ids=decoder_input,
                ).logits
                log_probs = torch.log_softmax(logits.float(), dim=-1)
                token_ll = log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
                mask = targets["attention_mask"].to(token_ll.dtype)
                mean_ll = (token_ll * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
                for index, value in zip(batch, mean_ll.tolist(), strict=True):
                    scores[index] = value
        return scores
