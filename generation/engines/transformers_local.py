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
from mmrag.generation.errors import GenerationError

if TYPE_CHECKING:
    from mmrag.generation.citations import CitationFormat
    from mmrag.generation.engines.batching import Request
    from mmrag.generation.types import Usage


def _is_vision_language(config: Any) -> bool:
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    return (
        hasattr(config, "vision_config")
        and config.model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    )


class TransformersEngine(InProcess):
    """Concurrent `stream` calls are decoded together, up to `max_batch` rows a batch
    (engines/batching.py); `max_batch=1` answers one request at a time. `batch_window_s` is how
    long a batch with room waits after the last request arrived, for callers that have not yet
    announced theirs."""

    def __init__(
        self,
        name_or_path: str,
        *,
        device: str | None = None,
        max_batch: int = 32,
        batch_window_s: float = 0.01,
    ) -> None:
        try:
            import torch
            import transformers

            from mmrag.generation.engines.batching import Batcher
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
        # A VLM's pixels are resized and normalised where the model runs when its processor can
        # (transformers' torch-backed "fast" image processors take `device`): on a GPU host the
        # per-request CPU work of 32 concurrent callers, serialised by the GIL, came before
        # their batch. `None` prepares them on the CPU (bench/batched_answers.py --pixels cpu).
        image_processor = getattr(self.processor, "image_processor", None)
        fast = type(image_processor).__name__.endswith("Fast")
        self.pixels_on: str | None = self.device if fast and self.device != "cpu" else None
        self.info = EngineInfo(name="transformers", model=name_or_path, accepts_images=self.vision)
        pad = self.tokenizer.pad_token_id
        self.pad_id: int = self.tokenizer.eos_token_id if pad is None else pad
        eos = self.model.generation_config.eos_token_id
        self.eos = frozenset([] if eos is None else [eos] if isinstance(eos, int) else eos)
        # One user of the model at a time: Qwen2-VL keeps the rope offsets of the batch it is
        # decoding on the model, which a concurrent forward pass would overwrite.
        self._model_lock = threading.Lock()
        self.batcher = Batcher(
            self._generate,
            max_batch=max_batch,
            window_s=batch_window_s,
            failure=f"transformers generation failed on {name_or_path!r}",
        )

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
        on_device = {"device": self.pixels_on} if images and self.pixels_on else {}
        inputs = self.processor(
            text=prompt, images=images or None, return_tensors="pt", **on_device
        )
        return inputs.to(self.device)

    def _generate_options(self, max_tokens: int, temperature: float) -> dict[str, Any]:
        options: dict[str, Any] = {
            "max_new_tokens": max_tokens,
            "pad_token_id": self.pad_id,
            "do_sample": temperature > 0,
        }
        if temperature > 0:
            options["temperature"] = temperature
        return options

    def _generate(self, rows: list[Request]) -> None:
        """One `generate` over a batch of requests with equal keys (the batcher's thread)."""
        from transformers import StoppingCriteriaList

        from mmrag.generation.engines.batching import RowsDone, RowStreamer, collate

        inputs = collate(rows, self.pad_id)
        if rows[0].top_k is not None:
            self._score(rows, inputs)
            return
        prompt_length = inputs["input_ids"].shape[-1]
        with self._model_lock, self.torch.inference_mode():
            self.model.generate(
                **inputs,
                **self._generate_options(max(row.max_tokens for row in rows), rows[0].temperature),
                streamer=RowStreamer(rows, self.eos),
                stopping_criteria=StoppingCriteriaList(
                    [RowsDone(rows, prompt_length, self.batcher.sweep)]
                ),
            )

    def _score(self, rows: list[Request], inputs: dict[str, Any]) -> None:
        """Each row's next-token log-probabilities, its top_k kept: one step of `generate`,
        which places a left-padded row's positions as it does when it decodes."""
        with self._model_lock, self.torch.inference_mode():
            out = self.model.generate(
                **inputs,
                **self._generate_options(1, 0.0),
                output_logits=True,
                return_dict_in_generate=True,
            )
        logprobs = self.torch.log_softmax(out.logits[0].float(), dim=-1)
        for row, row_logprobs in zip(rows, logprobs, strict=True):
            values, ids = row_logprobs.topk(min(row.top_k or 1, row_logprobs.shape[-1]))
            row.scores = (values.tolist(), ids.tolist())
            row.end()

    def stream(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 96,
        temperature: float = 0.0,
        stop: list[str] | None = None,
        constraint: CitationFormat | None = None,  # not enforced here: the prompt alone guides
        cancelled: Callable[[], bool] | None = None,
        usage: Usage | None = None,
    ) -> Iterator[str]:
        """The prompt is built here, in the caller's thread (announced to the batcher while it
        is), then joins the batcher's queue; its token ids come back and are decoded here too.
        Closing the iterator early (a stop string, or a caller that has its sentence) ends the
        request at the next token. `cancelled` is asked in the batcher's thread before the
        request enters a batch, while it waits and after every forward pass: a pass cannot be
        stopped half-way, so a prompt already being read is read to its end, and the request
        then stops at its first token."""
        from mmrag.generation.engines.batching import Request

        with self.batcher.arriving() as submit:
            request = Request(
                inputs=self._inputs(messages),
                max_tokens=max_tokens,
                temperature=temperature,
                cancelled=cancelled,
            )
            submit(request)
        cutter = StopCutter(stop)
        try:
            for piece in request.deltas(self.tokenizer):
                out = cutter.feed(piece)
                if out:
                    yield out
                if cutter.stopped:
                    return
            if request.error is not None:
                raise request.error
            tail = cutter.flush()
            if tail:
                yield tail
        finally:
            request.halt.set()
            if usage is not None:  # the prompt unpadded, and the tokens generated for it
                usage.prompt_tokens = request.inputs["input_ids"].shape[-1]
                usage.completion_tokens = request.emitted

    def next_token_logprobs(self, messages: list[Message], *, top_k: int = 20) -> dict[str, float]:
        """Through the batcher, as `stream`: concurrent calls (a judge's questions about one
        answer) are read in one forward pass."""
        from mmrag.generation.engines.batching import Request

        with self.batcher.arriving() as submit:
            request = Request(
                inputs=self._inputs(messages),
                max_tokens=1,
                temperature=0.0,
                cancelled=None,
                top_k=top_k,
            )
            submit(request)
        while request.tokens.get() is not None:
            pass
        if request.error is not None or request.scores is None:
            raise request.error or GenerationError(
                f"the transformers engine gave no log-probabilities for {self.info.model!r}"
            )
        table: dict[str, float] = {}
        for value, token_id in zip(*request.scores, strict=True):
            merge_logprob(table, self.tokenizer.decode([token_id]), value)
        return table
