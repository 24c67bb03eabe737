"""Answers/s of the transformers engine: one question at a time against concurrent questions
decoded in batches.

    python -m bench.batched_answers --random tiny-llama --device cpu --batch-sizes 4 8 16 \\
        --answers 32 --out docs/bench/batched-answers-cpu-tiny.json
    python -m bench.batched_answers --random qwen2-vl-2b --device cuda --batch-sizes 8 16 32 \\
        --answers 96 --out docs/bench/batched-answers-h100.json

Every answer is the answer prompt (`answer_messages`) over one photo source (a 640x480 JPEG,
sent as pixels to a VLM and described by its caption to a text model) and one text source,
with one of several questions of different lengths, so batches are left-padded. One at a
time: the answers in turn with `max_batch=1`, as the engine answered before batching. Batched:
B threads ask the same answers concurrently with `max_batch=B`, as `eval run --concurrency B`
or a busy service does; the B threads ask their first questions together (a barrier), as
callers that already exist do, so that what is timed is not a pool creating its threads one
by one (on two loaded cores, 30-40 ms apart). After an unmeasured warm-up the modes take
turns, --repeats times, and the report gives each one's median answers/s (and every run's),
the median CPU time of this process per answer (which other processes on a shared machine
disturb least), the mean batch the engine ran, how many answers were identical to the
one-at-a-time run, and what WebQA's test split (7,540 questions) would take at that rate
(generation only).

Models: `--model PATH` (any checkpoint), or a random one of a real architecture built here:
`tiny-llama` (test_generation_transformers.py's 2-layer Llama, bound by per-step overhead as
eager decoding on a GPU is), `tiny-llava` (the same tests' LLaVA: the photo goes through a
CLIP processor and tower), `smollm2-135m` (SmolLM2-135M's sizes) or `qwen2-vl-2b`
(bench/vlm.py's Qwen2-VL-2B, whose processor needs torchvision: GPU hosts only).

The mean batch is what the engine ran (`batcher.batches`); the CPU time per answer is this
process's, every thread's (preparing prompts, decoding text, and on a CPU the model itself).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import machine, write_report
from bench.vlm import Source, photo, random_qwen2_vl, tokenizer_with_vocabulary
from mmrag.generation.engines.base import Message
from mmrag.generation.prompts import answer_messages

WEBQA_TEST_QUESTIONS = 7_540
SOURCES = [
    Source("img-door", "image", "Harbor Inn door", "The red door of the Harbor Inn."),
    Source("txt-inn", "text", "Harbor Inn", "The Harbor Inn was built in 1887 by a captain."),
]
QUESTIONS = [
    "What colour is the door?",
    "What colour is the door of the inn built in 1887?",
    "Who built the Harbor Inn, and in which year was it built?",
    "Is the door of the inn that a captain built in 1887 red, blue or green, and how old is it?",
]

SMOLLM2_135M = {  # HuggingFaceTB/SmolLM2-135M-Instruct's config.json sizes
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "max_position_embeddings": 8192,
    "rope_theta": 100_000.0,
    "tie_word_embeddings": True,
}


def save_llama(folder: Path, tokenizer, config: Callable[..., Any]) -> Path:
    """`config(vocab_size, bos_token_id=..., eos_token_id=...)` with random weights, saved."""
    import torch
    from transformers import LlamaForCausalLM

    ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    torch.manual_seed(0)
    LlamaForCausalLM(config(len(tokenizer), **ids)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def random_model(name: str, folder: Path) -> Path:
    """A random checkpoint of a real architecture, saved as a user's checkpoint is."""
    if name == "qwen2-vl-2b":
        return random_qwen2_vl(folder)
    if name == "tiny-llama":
        from tests.test_generation_transformers import byte_tokenizer, llama_config

        return save_llama(folder, byte_tokenizer(), llama_config)
    if name == "tiny-llava":
        from tests.test_generation_transformers import byte_tokenizer, save_llava

        return save_llava(folder, byte_tokenizer())
    from transformers import LlamaConfig

    def smollm2(vocab_size: int, **ids: int) -> LlamaConfig:
        return LlamaConfig(vocab_size=vocab_size, **SMOLLM2_135M, **ids)

    return save_llama(folder, tokenizer_with_vocabulary(49_152), smollm2)


def prompts(count: int, images: bool) -> list[list[Message]]:
    jpeg = photo()
    return [
        answer_messages(
            QUESTIONS[i % len(QUESTIONS)], SOURCES, images=(lambda _: jpeg) if images else None
        )
        for i in range(count)
    ]


def answer_all(engine, messages: list[list[Message]], batch: int, max_tokens: int) -> tuple:
    """(answers, wall seconds, CPU seconds of this process, the batches the engine ran) with
    `batch` concurrent callers. CPU seconds are what other processes on a shared machine
    disturb least."""
    engine.batcher.max_batch = batch
    together = threading.Barrier(min(batch, len(messages)))
    caller = threading.local()

    def answer(message: list[Message]) -> str:
        if not hasattr(caller, "started"):  # a thread's first question
            caller.started = True
            together.wait()
        return engine.chat(message, max_tokens=max_tokens)

    before = Counter(engine.batcher.batches)
    started, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(batch) as pool:
        answers = list(pool.map(answer, messages))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return answers, seconds, cpu, engine.batcher.batches - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", help="a checkpoint: hub name or local directory")
    model.add_argument(
        "--random", choices=["tiny-llama", "tiny-llava", "smollm2-135m", "qwen2-vl-2b"]
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--answers", type=int, default=64, help="timed answers per mode")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each mode")
    # Where a VLM's processor prepares pixels (device: the engine's default on a GPU).
    parser.add_argument("--pixels", choices=["device", "cpu"], default="device")
    parser.add_argument("--no-alone", action="store_true", help="skip the one-at-a-time mode")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import torch
    import transformers

    from mmrag.generation.engines.transformers_local import TransformersEngine

    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        path = args.model or str(random_model(args.random, Path(tmp) / args.random))
        engine = TransformersEngine(path, device=args.device, max_batch=max(args.batch_sizes))
        load_s = time.perf_counter() - started
    if args.pixels == "cpu":
        engine.pixels_on = None
    messages = prompts(args.answers, engine.info.accepts_images)
    prompt_tokens = [engine._inputs(m)["input_ids"].shape[-1] for m in messages]
    answer_all(engine, messages[: max(args.batch_sizes)], max(args.batch_sizes), args.max_tokens)

    sizes = [*([] if args.no_alone else [1]), *args.batch_sizes]
    rates: dict[int, list[float]] = {size: [] for size in sizes}
    cpu_ms: dict[int, list[float]] = {size: [] for size in sizes}
    answers: dict[int, list[str]] = {}
    batches: dict[int, Counter[int]] = {size: Counter() for size in sizes}
    for _ in range(args.repeats):  # the modes take turns, so load from elsewhere falls alike
        for size in sizes:
            answers[size], seconds, cpu, ran = answer_all(engine, messages, size, args.max_tokens)
            rates[size].append(args.answers / seconds)
            cpu_ms[size].append(cpu / args.answers * 1000)
            batches[size] += ran
    alone = None if args.no_alone else statistics.median(rates[1])
    modes = []
    for size in sizes:
        rate = statistics.median(rates[size])
        modes.append(
            {
                "batch": size,
                "answers_per_s": round(rate, 2),
                "answers_per_s_runs": [round(r, 2) for r in rates[size]],
                "speedup": alone and round(rate / alone, 2),
                "cpu_ms_per_answer": round(statistics.median(cpu_ms[size]), 1),
                "mean_batch": round(
                    sum(n * count for n, count in batches[size].items()) / batches[size].total(), 1
                ),
                "identical_to_one_at_a_time": alone
                and sum(a == b for a, b in zip(answers[size], answers[1], strict=True)),
                "webqa_test_minutes": round(WEBQA_TEST_QUESTIONS / rate / 60, 1),
            }
        )
    on_cuda = args.device.startswith("cuda")
    results = {
        "command": " ".join(sys.argv),
        "machine": machine(
            device=torch.cuda.get_device_name() if on_cuda else "cpu",
            torch_threads=torch.get_num_threads(),
            torch=torch.__version__,
            transformers=transformers.__version__,
        ),
        "model": args.model or f"{args.random}, random weights",
        "dtype": str(engine.model.dtype),
        "parameters": sum(p.numel() for p in engine.model.parameters()),
        "photo_as_pixels": engine.info.accepts_images,
        "pixels_prepared_on": engine.pixels_on or "cpu",
        "prompt_tokens_min_max": [min(prompt_tokens), max(prompt_tokens)],
        "answers": args.answers,
        "repeats": args.repeats,
        "max_tokens": args.max_tokens,
        "save_and_load_s": round(load_s, 1),
        "modes": modes,
    }
    write_report(results, args.out)


if __name__ == "__main__":
    main()
