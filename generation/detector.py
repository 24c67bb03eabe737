"""An open-vocabulary detector: the best box for a few words in an image.

Any checkpoint transformers loads through `AutoModelForZeroShotObjectDetection` (OWLv2,
OWL-ViT, Grounding DINO, ...), by hub name or local directory. Their processors share
`post_process_grounded_object_detection`, differing in what else it takes (Grounding DINO needs
the token ids and a text threshold), so those extras are passed by the signature. Every box is
kept (threshold 0): grounding wants the single best box, however unsure, and a benchmark scores
an empty answer 0. Image processors run on PIL, as torchvision is absent on CPU hosts.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmrag.generation.errors import GenerationError
from mmrag.generation.grounding import clip_region
from mmrag.generation.types import Region

if TYPE_CHECKING:
    from PIL import Image


class OpenVocabularyDetector:
    def __init__(self, name_or_path: str, *, device: str | None = None) -> None:
        try:
            import torch
            import transformers
        except ImportError:
            raise GenerationError(
                "the detector needs torch and transformers; install mmrag[ml]"
            ) from None
        transformers.utils.logging.disable_progress_bar()
        self.torch = torch
        self.name = name_or_path
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            self.processor = transformers.AutoProcessor.from_pretrained(name_or_path)
            self.model = transformers.AutoModelForZeroShotObjectDetection.from_pretrained(
                name_or_path
            )
        except (OSError, ValueError, KeyError) as exc:
            hint = "" if Path(name_or_path).exists() else " (pass a local directory when offline)"
            message = " ".join(str(exc).split())[:300]
            raise GenerationError(
                f"cannot load the detector {name_or_path!r}{hint}: {message}; --detector takes "
                "an OWLv2, OWL-ViT or Grounding DINO checkpoint"
            ) from None
        self.model.to(self.device).eval()
        post_process = getattr(self.processor, "post_process_grounded_object_detection", None)
        if post_process is None:
            raise GenerationError(
                f"the detector {name_or_path!r} has no grounded post-processing; --detector takes "
                "an OWLv2, OWL-ViT or Grounding DINO checkpoint"
            )
        self.takes = set(inspect.signature(post_process).parameters)

    def detect(self, image: Image.Image, query: str) -> Region | None:
        """The highest-scoring box for `query` that overlaps the image, clipped to it.

        OWLv2 pads images to a square, so its best box may lie in the padding: boxes are tried
        best first until one has pixels inside the image.
        """
        width, height = image.size
        try:
            inputs = self.processor(
                text=[[query]], images=image, return_tensors="pt", truncation=True
            ).to(self.device)
            with self.torch.inference_mode():
                outputs = self.model(**inputs)
        except (ValueError, RuntimeError) as exc:
            message = " ".join(str(exc).split())[:300]
            raise GenerationError(f"the detector {self.name!r} failed: {message}") from None
        extra: dict[str, Any] = {}
        if "input_ids" in self.takes:
            extra["input_ids"] = inputs["input_ids"]
        if "text_threshold" in self.takes:
            extra["text_threshold"] = 0.0
        found = self.processor.post_process_grounded_object_detection(
            outputs, threshold=0.0, target_sizes=[(height, width)], **extra
        )[0]
        scores = found["scores"].float().cpu()
        boxes = found["boxes"].float().cpu()
        for index in scores.argsort(descending=True, stable=True).tolist():
            region = clip_region(
                boxes[index].tolist(), width, height, score=float(scores[index]), label=query
            )
            if region is not None:
                return region
        return None
