"""CLIP-style image+text encoders behind one interface, by hub name or local path.

Backends: `transformers` (CLIPModel, SiglipModel, any AutoModel with get_image_features /
get_text_features; runs on CPU here) and `open_clip` (GPU machines: it needs torchvision, which
must never be installed on CPU hosts, so it is imported only when chosen). Preprocessing is
separate from encoding so a worker pool can decode and preprocess while the model encodes. On a
CUDA device the transformers backend decodes and preprocesses on the GPU as well (`gpu_images`:
nvJPEG and the processor's recipe in torch); on CPU its processor does, as before.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from PIL import Image

from mmrag.indexes.encoders.base import EncoderInfo, l2_normalise, pick_device, quiet_model_loading
from mmrag.indexes.errors import InputError

if TYPE_CHECKING:  # a question's path loads this module, never the build's image pipeline
    from mmrag.indexes.encoders.gpu_images import GpuImages

CLIP_BACKENDS = ("transformers", "open_clip")


class ClipEncoder(Protocol):
    info: EncoderInfo
    # Bytes to model input on the GPU (`prefetch.batch_pixels` uses it); None: `preprocess`.
    gpu_images: GpuImages | None

    def preprocess(self, images: list[Image.Image]) -> np.ndarray: ...

    def encode_pixels(self, pixels: Any) -> np.ndarray:
        """Unit vectors of `preprocess`'s arrays, or of `gpu_images`' tensors."""
        ...

    def encode_texts(self, texts: list[str]) -> np.ndarray: ...


def _features(output):
    """transformers 4.x returns the projected tensor, 5.x an output holding it as pooler_output."""
    return output if hasattr(output, "shape") else output.pooler_output


class TransformersClip:
    def __init__(self, name_or_path: str, *, device: str | None = None, fp16: bool = True) -> None:
        import torch
        from transformers import AutoImageProcessor, AutoModel, AutoTokenizer

        from mmrag.indexes.encoders.gpu_images import gpu_images

        quiet_model_loading()
        self.torch = torch
        self.device = pick_device(device)
        try:
            self.model = AutoModel.from_pretrained(name_or_path).eval()
            # The torchvision backend is faster, but torchvision is absent on CPU hosts (and
            # must stay so): there the PIL + numpy backend does the same preprocessing.
            backend = "torchvision" if importlib.util.find_spec("torchvision") else "pil"
            self.processor = AutoImageProcessor.from_pretrained(name_or_path, backend=backend)
            self.tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        except (OSError, ValueError) as exc:
            hint = "" if Path(name_or_path).exists() else " (pass a local directory when offline)"
            raise InputError(f"cannot load CLIP model {name_or_path!r}{hint}: {exc}") from None
        self.dtype = torch.float16 if fp16 and self.device.startswith("cuda") else torch.float32
        self.model.to(self.device, dtype=self.dtype)
        self.gpu_images = gpu_images(self.processor, self.device, self.dtype)
        config = self.model.config
        self.max_length = getattr(
            getattr(config, "text_config", config), "max_position_embeddings", 77
        )
        # SigLIP was trained on max-length padded text; CLIP pads to the longest in the batch.
        self.padding = "max_length" if "siglip" in config.model_type else True
        dim = getattr(config, "projection_dim", None) or config.text_config.hidden_size
        self.info = EncoderInfo(
            kind="clip", name=name_or_path, backend="transformers", dim=int(dim)
        )

    def preprocess(self, images: list[Image.Image]) -> np.ndarray:
        return self.processor(images=images, return_tensors="np")["pixel_values"]

    def encode_pixels(self, pixels: Any) -> np.ndarray:
        with self.torch.inference_mode():
            tensor = self.torch.as_tensor(pixels).to(self.device, dtype=self.dtype)
            features = _features(self.model.get_image_features(pixel_values=tensor))
        return l2_normalise(features.float().cpu().numpy())

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        tokens = self.tokenizer(
            texts,
            padding=self.padding,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        ).to(self.device)
        with self.torch.inference_mode():
            features = _features(self.model.get_text_features(**tokens))
        return l2_normalise(features.float().cpu().numpy())


class OpenClip:
    """`name` is ARCH or ARCH:PRETRAINED, e.g. ViT-B-32:laion2b_s34b_b79k or ViT-B-32:/ckpt.bin."""

    def __init__(self, name: str, *, device: str | None = None, fp16: bool = True) -> None:
        try:
            import open_clip
            import torch
        except ImportError as exc:
            raise InputError(
                f"the open_clip backend needs open_clip_torch and torchvision ({exc}); install "
                "mmrag[gpu] on a GPU machine, or use --clip-backend transformers"
            ) from None
        self.torch = torch
        self.device = pick_device(device)
        arch, _, pretrained = name.partition(":")
        try:
            model, _, self.transform = open_clip.create_model_and_transforms(
                arch,
                pretrained=pretrained or None,
                device=self.device,
                precision="fp16" if fp16 and self.device.startswith("cuda") else "fp32",
            )
        except (RuntimeError, OSError) as exc:
            raise InputError(f"cannot load open_clip model {name!r}: {exc}") from None
        self.model = model.eval()
        self.tokenizer = open_clip.get_tokenizer(arch)
        self.dtype = next(self.model.parameters()).dtype
        # Its preprocessing is open_clip's own transform, not a Hugging Face processor config.
        self.gpu_images = None
        dim = int(self.model.text_projection.shape[1])
        self.info = EncoderInfo(kind="clip", name=name, backend="open_clip", dim=dim)

    def preprocess(self, images: list[Image.Image]) -> np.ndarray:
        return np.stack([self.transform(image).numpy() for image in images])

    def encode_pixels(self, pixels: np.ndarray) -> np.ndarray:
        with self.torch.inference_mode():
            tensor = self.torch.from_numpy(pixels).to(self.device, dtype=self.dtype)
            features = self.model.encode_image(tensor)
        return l2_normalise(features.float().cpu().numpy())

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        with self.torch.inference_mode():
            features = self.model.encode_text(self.tokenizer(texts).to(self.device))
        return l2_normalise(features.float().cpu().numpy())


def load_clip(
    name_or_path: str,
    *,
    backend: str = "transformers",
    device: str | None = None,
    fp16: bool = True,
) -> ClipEncoder:
    if backend == "transformers":
        return TransformersClip(name_or_path, device=device, fp16=fp16)
    if backend == "open_clip":
        return OpenClip(name_or_path, device=device, fp16=fp16)
    raise InputError(f"unknown CLIP backend {backend!r}; choose one of {', '.join(CLIP_BACKENDS)}")
