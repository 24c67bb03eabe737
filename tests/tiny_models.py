"""Tiny random models of real architectures, saved like a user's checkpoint and loaded by path.

No CLIP weights can be had offline here, so tests build a 2-layer CLIP with a character
tokenizer: the real code path (AutoModel, image processor, tokenizer from a directory), random
weights.
"""

from __future__ import annotations

import string
from pathlib import Path


def tiny_clip(folder: Path, seed: int = 0, projection_dim: int = 16) -> Path:
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPTokenizer

    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    characters = string.ascii_lowercase + string.digits
    vocab.update({c: len(vocab) + i for i, c in enumerate(characters)})
    vocab.update({f"{c}</w>": len(vocab) + i for i, c in enumerate(characters)})
    layers = {
        "hidden_size": 32,
        "intermediate_size": 37,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
    }
    config = CLIPConfig(
        text_config={
            **layers,
            "vocab_size": len(vocab),
            "max_position_embeddings": 77,
            "bos_token_id": 0,
            "eos_token_id": 1,
            "pad_token_id": 1,
        },
        vision_config={**layers, "image_size": 32, "patch_size": 8},
        projection_dim=projection_dim,
    )
    torch.manual_seed(seed)
    CLIPModel(config).save_pretrained(folder)
    CLIPTokenizer(vocab=vocab, merges=[]).save_pretrained(folder)
    CLIPImageProcessor(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    ).save_pretrained(folder)
    return folder
