"""Any Hugging Face causal LM or vision-language model in this process, by hub name or path.

A checkpoint whose config is an image-text-to-text model (LLaVA, Idefics, Qwen-VL, ...) loads
through AutoModelForImageTextToText + AutoProcessor and sees images; anything else loads through
AutoModelForCausalLM + AutoTokenizer. Both render prompts with the checkpoint's chat template.
On CPU prefer the llamacpp engine: the same SmolLM2 is ~10x slower here.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmrag.generation.engines.base import (
    EngineInfo,
    InProcess,
    Message,
    StopCutter,
    decode_data_url,
    merge_logprob,
    text_only,
)
from mmrag.generation.errors import GenerationCancelled, GenerationError

if TYPE_CHECKING:
    from mmrag.generation.citations import CitationFormat


def _is_vision_language(config: Any) -> bool:
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    return (
        hasattr(config, "vision_config")
        and config.model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    )


class TransformersEngine(InProcess):
    def __init__(self, name_or_path: str, *, device: str | None = None) -> None:
        try:
            import torch
            import transformers
        except ImportError:
            raise GenerationError(
                "the transformers engine needs torch and transformers; install mmrag[ml]"
            ) from None
        transformers.utils.logging.disable_progress_bar()
        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        try:
            config = transformers.AutoConfig.from_pretrained(name_or_path)
            self.vision = _is_vision_language(config)
            if self.vision:
                self.processor = transformers.AutoProcessor.from_pretrained(name_or_path)
                self.tokenizer = self.processor.tokenizer
                model_class = transformers.AutoModelForImageTextToText
            else:
                self.processor = None
                self.tokenizer = transformers.AutoTokenizer.from_pretrained(name_or_path)
                model_class = transformers.AutoModelForCausalLM
            self.model = model_class.from_pretrained(name_or_path, dtype=dtype)
        except (OSError, ValueError, KeyError) as exc:
            hint = "" if Path(name_or_path).exists() else " (pass a local directory when offline)"
            message = " ".join(str(exc).split())[:300]
            raise GenerationError(
                f"the transformers engine cannot load {name_or_path!r}{hint}: {message}"
            ) from None
        self.model.to(self.device).eval()
        self.info = EngineInfo(name="transformers", model=name_or_path, accepts_images=self.vision)

    def _inputs(self, messages: list[Message]) -> dict[str, Any]:
        """Token ids (and pixels for a VLM) of the chat-templated prompt, on the model's device."""
        try:
            return self._encode(messages)
        except ValueError as exc:  # transformers' "no chat template", a processor's complaint
            message = " ".join(str(exc).split())[:300]
            raise GenerationError(
                f"the transformers engine cannot build a prompt for {self.info.model!r}: {message}"
            ) from None

    def _encode(self, messages: list[Message]) -> dict[str, Any]:
        if not self.vision:
            prompt = self.tokenizer.apply_chat_template(
                text_only(messages), add_generation_prompt=True, tokenize=False
            )
            inputs = self.tokenizer(prompt, add_special_tokens=False, return_tensors="pt")
            return inputs.to(self.device)
        from PIL import Image, ImageOps

        images, templated = [], []
        for message in messages:
            content = message["content"]
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            parts = []
            for part in content:
                if part.get("type") == "image_url":
                    data = decode_data_url(part["image_url"]["url"])
                    # Upright, as OCR and the grounder see the same photo.
                    photo = ImageOps.exif_transpose(Image.open(io.BytesIO(data)))
                    images.append(photo.convert("RGB"))
                    parts.append({"type": "image"})
                else:
                    parts.append(part)
            templated.append({**message, "content": parts})
        prompt = self.processor.apply_chat_template(
            templated, add_generation_prompt=True, tokenize=False
        )
        inputs = self.processor(text=prompt, images=images or None, return_tensors="pt")
        return inputs.to(self.device)

    def _generate_options(self, max_tokens: int, temperature: float) -> dict[str, Any]:
        pad = self.tokenizer.pad_token_id
        options: dict[str, Any] = {
            "max_new_tokens": max_tokens,
            "pad_token_id": self.tokenizer.eos_token_id if pad is None else pad,
            "do_sample": temperature > 0,
        }
        if temperature > 0:
            options["temperature"] = temperature
        return options

    def stream(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 96,
        temperature: float = 0.0,
        stop: list[str] | None = None,
        constraint: CitationFormat | None = None,  # not enforced here: the prompt alone guides
        cancelled: Callable[[], bool] | None = None,
    ) -> Iterator[str]:
        """Generation runs in a thread feeding a TextIteratorStreamer; closing the iterator early
        (a stop string, or a caller that has its sentence) stops generation at the next token.
        `cancelled` is asked in that thread after every forward pass, the prompt's included: a
        pass cannot be stopped half-way, so a cancelled prompt is read to its end, and then
        generation stops at its first token."""
        from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

        inputs = self._inputs(messages)
        streamer = TextIteratorStreamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True)
        halt = threading.Event()
        unwanted = threading.Event()

        class Halt(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> bool:
                if cancelled is not None and cancelled():
                    unwanted.set()
                return halt.is_set() or unwanted.is_set()

        failure: list[BaseException] = []

        def run() -> None:
            try:
                with self.torch.inference_mode():
                    self.model.generate(
                        **inputs,
                        **self._generate_options(max_tokens, temperature),
                        streamer=streamer,
                        stopping_criteria=StoppingCriteriaList([Halt()]),
                    )
            except Exception as exc:  # surfaced in the consuming thread below
                failure.append(exc)
                streamer.end()

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        cutter = StopCutter(stop)
        try:
            for piece in streamer:
                out = cutter.feed(piece)
                if out:
                    yield out
                if cutter.stopped:
                    return
            if unwanted.is_set():
                raise GenerationCancelled("generation was cancelled by its caller")
            tail = cutter.flush()
            if tail:
                yield tail
        finally:
            halt.set()
            worker.join()
        if failure:
            raise GenerationError(
                f"transformers generation failed on {self.info.model!r}: {failure[0]}"
            )

    def next_token_logprobs(self, messages: list[Message], *, top_k: int = 20) -> dict[str, float]:
        inputs = self._inputs(messages)
        with self.torch.inference_mode():
            logits = self.model(**inputs).logits[0, -1].float()
        logprobs = self.torch.log_softmax(logits, dim=-1)
        values, ids = logprobs.topk(min(top_k, logprobs.shape[-1]))
        table: dict[str, float] = {}
        for value, token_id in zip(values.tolist(), ids.tolist(), strict=True):
            merge_logprob(table, self.tokenizer.decode([token_id]), value)
        return table
