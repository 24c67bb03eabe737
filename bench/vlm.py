"""Answer latency of a vision-language model through the transformers engine.

    python -m bench.vlm --device cuda --out docs/bench/vlm-h100.json

No VLM weights can be downloaded here, so the model is Qwen2-VL-2B-Instruct's architecture at
its published sizes (ViT of 32 blocks x 1280, merger, 28-layer 1536-wide language model, a
151,936-token vocabulary) with random weights: the same compute per token as the real
checkpoint. It is saved and loaded by path, as a user's checkpoint is, then asked questions
through `AnswerWriter` with one photo source (640x480 JPEG, 391 visual tokens after merging)
and one text source. Random weights never write a period, so every answer runs to
`--max-tokens`: the figure is prefill (vision tower + prompt) plus that many decode steps.
Qwen2-VL's processor needs torchvision, which CPU hosts of this project must not have: this
runs on GPU hosts.
"""

from __future__ import annotations

import argparse
import io
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import latency_percentiles, write_report
from mmrag.generation import AnswerWriter, load_engine

VOCAB = 151_936
SPECIAL = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>"]
SPECIAL += ["<|image_pad|>", "<|video_pad|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for p in m['content'] %}{% if p['type'] == 'text' %}{{ p['text'] }}"
    "{% else %}<|vision_start|><|image_pad|><|vision_end|>{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class Source:
    id: str
    modality: str
    title: str
    text: str


def tokenizer_with_vocabulary(size: int):
    """A byte-level tokenizer padded to the real vocabulary, so the LM head costs what it does in
    the real model and any sampled id decodes to text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alphabet)}
    vocab.update({f"w{i}": i for i in range(len(alphabet), size - len(SPECIAL))})
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        additional_special_tokens=SPECIAL[2:],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def random_qwen2_vl(folder: Path) -> Path:
    """Qwen2-VL-2B-Instruct's config.json sizes, random bf16 weights, saved with a processor."""
    import torch
    from transformers import (
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    tokenizer = tokenizer_with_vocabulary(VOCAB)
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL}
    text = dict(
        vocab_size=len(tokenizer),
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]},
        tie_word_embeddings=True,
        eos_token_id=ids["<|im_end|>"],
        bos_token_id=ids["<|im_start|>"],
    )
    vision = dict(
        depth=32,
        embed_dim=1280,
        hidden_size=1536,
        mlp_ratio=4,
        num_heads=16,
        patch_size=14,
        spatial_merge_size=2,
        temporal_patch_size=2,
    )
    config = Qwen2VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen2VLForConditionalGeneration(config).to(torch.bfloat16)
    model.save_pretrained(folder)
    del model
    Qwen2VLProcessor(
        image_processor=Qwen2VLImageProcessor(),
        tokenizer=tokenizer,
        video_processor=Qwen2VLVideoProcessor(),  # unused, but the processor requires one
        chat_template=CHAT_TEMPLATE,
    ).save_pretrained(folder)
    return folder


def photo() -> bytes:
    pixels = np.random.default_rng(0).integers(0, 256, (480, 640, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=85)
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--answers", type=int, default=10, help="timed answers after a warm-up")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import torch
    import transformers

    sources = [
        Source("img-door", "image", "Harbor Inn door", "The red door of the Harbor Inn."),
        Source("txt-inn", "text", "Harbor Inn", "The Harbor Inn was built in 1887 by a captain."),
    ]
    jpeg = photo()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        folder = random_qwen2_vl(Path(tmp) / "qwen2-vl")
        engine = load_engine("transformers", str(folder), device=args.device)
        load_s = time.perf_counter() - started
    params = sum(p.numel() for p in engine.model.parameters())
    writer = AnswerWriter(engine, max_tokens=args.max_tokens, images=lambda _: jpeg)
    question = "What colour is the door of the inn built in 1887?"
    writer.write(question, sources)  # warm-up: kernels, allocator
    seconds = []
    for _ in range(args.answers):
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        began = time.perf_counter()
        writer.write(question, sources)
        seconds.append(time.perf_counter() - began)
    results = {
        "machine": {
            "platform": platform.platform(),
            "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
        "model": "Qwen2-VL-2B architecture, random weights, bf16",
        "parameters": params,
        "answers": args.answers,
        "max_tokens": args.max_tokens,
        "save_and_load_s": round(load_s, 1),
        **latency_percentiles(seconds),
        "mean_ms": round(statistics.mean(seconds) * 1000, 1),
    }
    write_report(results, args.out)


if __name__ == "__main__":
    main()
