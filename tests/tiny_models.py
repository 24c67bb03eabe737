"""Tiny random models of real architectures, saved like a user's checkpoint and loaded by path.

No CLIP weights can be had offline here, so tests build a 2-layer CLIP with a character
tokenizer: the real code path (AutoModel, image processor, tokenizer from a directory), random
weights.
"""

from __future__ import annotations

import string
from pathlib import Path


def tiny_clip(
    folder: Path, seed: int = 0, projection_dim: int = 16, vit_b_32: bool = False
) -> Path:
    """A random CLIP; `vit_b_32=True` gives the real ViT-B/32 sizes (for throughput benches)."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPTokenizer

    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    characters = string.ascii_lowercase + string.digits
    vocab.update({c: len(vocab) + i for i, c in enumerate(characters)})
    vocab.update({f"{c}</w>": len(vocab) + i for i, c in enumerate(characters)})
    tokens = {"vocab_size": len(vocab), "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 1}
    if vit_b_32:  # CLIPConfig's defaults are ViT-B/32's
        config = CLIPConfig(text_config=tokens)
        side = 224
    else:
        layers = {
            "hidden_size": 32,
            "intermediate_size": 37,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
        }
        config = CLIPConfig(
            text_config={**layers, **tokens, "max_position_embeddings": 77},
            vision_config={**layers, "image_size": 32, "patch_size": 8},
            projection_dim=projection_dim,
        )
        side = 32
    torch.manual_seed(seed)
    CLIPModel(config).save_pretrained(folder)
    CLIPTokenizer(vocab=vocab, merges=[]).save_pretrained(folder)
    CLIPImageProcessor(
        size={"shortest_edge": side}, crop_size={"height": side, "width": side}
    ).save_pretrained(folder)
    return folder


def tiny_cross_encoder(folder: Path, seed: int = 0) -> Path:
    """A 2-layer BERT relevance head (num_labels=1) with a character WordPiece vocabulary."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    words = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        *string.ascii_lowercase,
        *(f"##{c}" for c in string.ascii_lowercase),
        *string.digits,
        "?",
        ".",
        ",",
    ]
    vocab = {word: i for i, word in enumerate(words)}
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        num_labels=1,
    )
    torch.manual_seed(seed)
    BertForSequenceClassification(config).save_pretrained(folder)
    BertTokenizer(vocab=vocab).save_pretrained(folder)
    return folder
