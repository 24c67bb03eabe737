"""Sentence embeddings on onnxruntime, so that a question's path needs no torch.

`import sentence_transformers` takes 7-9 s on 2 cores (it pulls in transformers, torch and
scikit-learn): longer than the search it serves. A sentence-transformers model made of a
Transformer and mean or CLS pooling (all-MiniLM-L6-v2, the embedded default, is one) is exported
to ONNX with torch once per machine, into the user's cache, and kept only if it embeds a set of
probe texts as sentence-transformers does (cosine >= 0.9999 on each). From then on it runs on
onnxruntime and `tokenizers`, which import in 0.2 s and encode a question in a few ms. A model
of another shape, or one whose export fails the check, keeps the sentence-transformers path.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import logging
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import xxhash

from mmrag.indexes.atomic import atomic_write_bytes, atomic_write_text
from mmrag.indexes.encoders.base import EncoderInfo, l2_normalise, quiet_model_loading

log = logging.getLogger(__name__)

# Bumped when the exported graph or its meta change: older exports are then made again.
EXPORT_FORMAT = 1
AGREEMENT = 0.9999
# Short and long, cased and not, accents, digits, CJK, an empty string and one past the
# 256-token window, so padding, truncation and normalisation are all exercised.
AGREEMENT_PROBES = (
    "a red door of an inn beside the harbour",
    "What color is the door of the Harbor Inn?",
    "The lighthouse of Dunmore was built in 1887 and stands 31 metres tall.",
    "Ünïcödé café ☕ 北京 — “quotes” and dashes",
    "x",
    "",
    "DOUBLE PARKING PROHIBITED 7AM-9AM MON-FRI",
    " ".join(["the tower of the old mill seen from the lane"] * 60),
)
# Sorted by length, batches of this many pad little and stay in cache on a few cores.
BATCH_SIZE = 32
_POOLING_MODES: dict[str, Literal["mean", "cls"]] = {
    "mean": "mean",
    "cls": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
}
_LAYOUT_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", "tokenizer.json")


@dataclass(frozen=True)
class SentenceLayout:
    """What running a sentence-transformers folder without it takes."""

    folder: Path
    pooling: Literal["mean", "cls"]
    max_seq_length: int
    lowercase: bool
    dim: int

    @classmethod
    def read(cls, folder: Path) -> SentenceLayout | None:
        """The layout of `folder` (as sentence-transformers 2-5 or 6 save it), or None where
        only sentence-transformers reproduces the model: other modules (a Dense layer, say),
        other pooling, a default prompt, no tokenizer.json."""
        try:
            modules = [m["type"].rsplit(".", 1)[-1] for m in _json(folder / "modules.json")]
            config = _json(folder / "sentence_bert_config.json")
            pooling = _json(folder / "1_Pooling" / "config.json")
            model = _json(folder / "config.json")
            tokenizer = _json(folder / "tokenizer_config.json", default={})
            prompts = _json(folder / "config_sentence_transformers.json", default={})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if modules not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            return None
        if not (folder / "tokenizer.json").is_file() or prompts.get("default_prompt_name"):
            return None
        if not _plain_text_transformer(config):
            return None
        mode = _pooling_mode(pooling)
        dim = pooling.get("word_embedding_dimension", pooling.get("embedding_dimension"))
        if mode is None or not isinstance(dim, int):
            return None
        windows = (
            config.get("max_seq_length"),
            tokenizer.get("model_max_length"),
            model.get("max_position_embeddings"),
        )
        window = next((w for w in windows if isinstance(w, int) and 0 < w < 100_000), 512)
        return cls(folder, mode, window, bool(config.get("do_lower_case")), dim)

    def fingerprint(self) -> str:
        """Names, sizes and times of the files an export reads: a changed model exports anew."""
        digest = xxhash.xxh3_64(f"{EXPORT_FORMAT}:{self.folder.resolve()}".encode())
        for name in _LAYOUT_FILES:
            path = self.folder / name
            if path.is_file():
                stat = path.stat()
                digest.update(f"|{name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
        return digest.hexdigest()

    def tokenizer(self):
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
        # sentence-transformers truncates at the model's window, not at tokenizer.json's own
        # setting (128 for MiniLM), and pads each batch to its longest text.
        tokenizer.enable_truncation(self.max_seq_length)
        padding = tokenizer.padding or {}
        tokenizer.enable_padding(
            pad_id=padding.get("pad_id", 0), pad_token=padding.get("pad_token", "[PAD]")
        )
        return tokenizer


def _plain_text_transformer(config: dict) -> bool:
    """The Transformer module's settings say: text in, last hidden state out."""
    known = {"max_seq_length", "do_lower_case", "transformer_task", "modality_config"}
    text = {"text": {"method": "forward", "method_output_name": "last_hidden_state"}}
    return (
        not set(config) - known - {"module_output_name"}
        and config.get("transformer_task", "feature-extraction") == "feature-extraction"
        and config.get("modality_config", text) == text
        and config.get("module_output_name", "token_embeddings") == "token_embeddings"
    )


def _pooling_mode(pooling: dict) -> Literal["mean", "cls"] | None:
    """Mean or CLS pooling, in either format (`pooling_mode_mean_tokens: true` up to
    sentence-transformers 5, `pooling_mode: "mean"` from 6); None for anything else."""
    if "pooling_mode" in pooling:
        modes = [pooling["pooling_mode"]]
    else:
        modes = [key for key, on in pooling.items() if key.startswith("pooling_mode") and on]
    return _POOLING_MODES.get(modes[0]) if len(modes) == 1 else None


def _json(path: Path, default: object = None):
    if default is not None and not path.is_file():
        return default
    return json.loads(path.read_text(encoding="utf-8"))


def cache_root() -> Path:
    """Where exports live: $XDG_CACHE_HOME/mmrag/onnx (~/.cache/mmrag/onnx)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mmrag" / "onnx"


class OnnxSentenceEncoder:
    """The `TextEncoder` of a sentence-transformers model, on onnxruntime."""

    def __init__(
        self, layout: SentenceLayout, model: bytes, info: EncoderInfo, *, threads: int | None
    ) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads or 0
        options.inter_op_num_threads = 1
        # Idle threads spinning for the next batch would take the cores llama.cpp generates on.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(
            model, options, providers=["CPUExecutionProvider"]
        )
        self.inputs = [node.name for node in self.session.get_inputs()]
        self.layout = layout
        self.tokenizer = layout.tokenizer()
        self.info = info

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        if self.layout.lowercase:
            texts = [text.lower() for text in texts]
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=True)
        # Every encoding comes padded to the longest text of the call: sort by real length,
        # so each batch is cut to its own longest.
        order = np.argsort([-sum(e.attention_mask) for e in encodings], kind="stable")
        vectors = np.empty((len(texts), self.info.dim), dtype=np.float32)
        for start in range(0, len(order), BATCH_SIZE):
            rows = order[start : start + BATCH_SIZE]
            vectors[rows] = self._encode([encodings[i] for i in rows])
        return l2_normalise(vectors)

    def _encode(self, encodings) -> np.ndarray:
        width = max(sum(e.attention_mask) for e in encodings)  # padding is on the right
        arrays = {
            "input_ids": np.array([e.ids[:width] for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask[:width] for e in encodings], np.int64),
            "token_type_ids": np.array([e.type_ids[:width] for e in encodings], dtype=np.int64),
        }
        hidden = self.session.run(None, {name: arrays[name] for name in self.inputs})[0]
        mask = arrays["attention_mask"]
        if self.layout.pooling == "cls":
            return hidden[:, 0]
        weights = mask[..., None].astype(np.float32)
        return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)


def load_onnx_encoder(
    name: str, folder: Path, *, threads: int | None = None
) -> OnnxSentenceEncoder | None:
    """The ONNX encoder of `folder`, exported first if this machine has none; None where the
    model's shape or its export rules the fast path out (the caller then uses torch)."""
    layout = SentenceLayout.read(folder)
    if layout is None:
        return None
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name.rstrip("/").rsplit("/", 1)[-1])
    target = cache_root() / f"{slug}-{layout.fingerprint()}"
    model, meta = _cached(target)
    if not meta:
        try:
            target.mkdir(parents=True, exist_ok=True)
            with _exclusive(target / ".lock"):
                model, meta = _cached(target)  # another process may have exported meanwhile
                if not meta:
                    model, meta = _export(layout, target)
        except OSError as exc:  # a cache that cannot be written: export, but only for now
            log.warning("cannot write the ONNX cache %s (%s)", target, exc)
            model, meta = _export(layout, None)
    if model is None:
        return None
    info = EncoderInfo(kind="text", name=name, backend="sentence-transformers", dim=layout.dim)
    return OnnxSentenceEncoder(layout, model, info, threads=threads)


def _cached(target: Path) -> tuple[bytes | None, dict]:
    """(model, meta) of the export in `target`: the model is None where the export was
    refused (the meta says why, and it is not tried again); both are empty where there is no
    whole, unaltered export (the model's checksum is in the meta)."""
    try:
        meta = json.loads((target / "meta.json").read_text())
        if meta.get("format") != EXPORT_FORMAT:
            return None, {}
        if not meta.get("agrees"):
            return None, meta
        model = (target / "model.onnx").read_bytes()
    except (OSError, ValueError):
        return None, {}
    if xxhash.xxh3_64_hexdigest(model) != meta.get("xxh3"):
        return None, {}
    return model, meta


@contextlib.contextmanager
def _exclusive(lock: Path):
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _export(layout: SentenceLayout, target: Path | None) -> tuple[bytes | None, dict]:
    """Export with torch and check against sentence-transformers; into `target` (the model,
    then the meta that vouches for it), or nowhere when None."""
    meta: dict = {"format": EXPORT_FORMAT, "source": str(layout.folder), "dim": layout.dim}
    model: bytes | None = None
    try:
        model = _to_onnx(layout)
        agreement = _agreement(layout, model)
        meta.update(agreement=round(agreement, 7), agrees=agreement >= AGREEMENT)
        if not meta["agrees"]:
            meta["why"] = f"cosine {agreement:.6f} < {AGREEMENT} on the probe texts"
    except Exception as exc:  # an exporter or a runtime that cannot take this model
        meta.update(agrees=False, why=" ".join(f"{type(exc).__name__}: {exc}".split())[:500])
    if not meta["agrees"]:
        where = f"; delete {target} to try again" if target is not None else ""
        log.warning(
            "no ONNX export of %s (%s): it runs on sentence-transformers%s",
            layout.folder,
            meta["why"],
            where,
        )
        model = None
    elif target is not None:
        meta["xxh3"] = xxhash.xxh3_64_hexdigest(model)
        atomic_write_bytes(target / "model.onnx", model)
    if target is not None:
        atomic_write_text(target / "meta.json", json.dumps(meta, indent=2))
    return model, meta


def _to_onnx(layout: SentenceLayout) -> bytes:
    import inspect

    import torch
    from transformers import AutoModel

    quiet_model_loading()
    model = AutoModel.from_pretrained(layout.folder, attn_implementation="eager").eval()
    accepted = inspect.signature(model.forward).parameters
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in accepted]

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors):
            return self.model(**dict(zip(names, tensors, strict=True))).last_hidden_state

    encodings = layout.tokenizer().encode_batch(["a probe", "a longer probe of a few words"])
    fields = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}
    example = tuple(
        torch.tensor([getattr(e, fields[name]) for e in encodings], dtype=torch.long)
        for name in names
    )
    axes = {name: {0: "batch", 1: "tokens"} for name in [*names, "last_hidden_state"]}
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the tracer's notes on shapes it fixes (none here)
        torch.onnx.export(
            LastHiddenState(),
            example,
            buffer,
            dynamo=False,
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
        )
    return buffer.getvalue()


def _agreement(layout: SentenceLayout, model: bytes) -> float:
    """The least cosine between the ONNX and the sentence-transformers vectors of the probes."""
    from sentence_transformers import SentenceTransformer

    quiet_model_loading()
    reference = SentenceTransformer(str(layout.folder), device="cpu").encode(
        list(AGREEMENT_PROBES), convert_to_numpy=True, normalize_embeddings=True
    )
    info = EncoderInfo(kind="text", name="probe", backend="onnx", dim=layout.dim)
    fast = OnnxSentenceEncoder(layout, model, info, threads=None)
    return float(np.min(np.sum(fast.encode_texts(list(AGREEMENT_PROBES)) * reference, axis=1)))
