"""Tiny random models of real architectures, saved like a user's checkpoint and loaded by path.

No CLIP weights can be had offline here, so tests build a 2-layer CLIP with a character
tokenizer: the real code path (AutoModel, image processor, tokenizer from a directory), random
weights.
"""

from __future__ import annotations

import string
from pathlib import Path


def tiny_clip(
    folder: Path,
    seed: int = 0,
    projection_dim: int = 16,
    vit_b_32: bool = False,
    vit_l_14: bool = False,
) -> Path:
    """A random CLIP; `vit_b_32=True` gives the real ViT-B/32 sizes and `vit_l_14=True`
    ViT-L/14's (openai/clip-vit-large-patch14, 428M parameters), for throughput benches."""
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
    elif vit_l_14:
        text = {"hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12}
        vision = {"hidden_size": 1024, "intermediate_size": 4096, "num_attention_heads": 16}
        config = CLIPConfig(
            text_config={**tokens, **text},
            vision_config={**vision, "num_hidden_layers": 24, "patch_size": 14},
            projection_dim=768,
        )
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


# A character WordPiece vocabulary: every English word tokenises, the model stays tiny.
WORDPIECE_CHARACTERS = [
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


def tiny_cross_encoder(folder: Path, seed: int = 0, labels: tuple[str, ...] | None = None) -> Path:
    """A 2-layer BERT with a character WordPiece vocabulary: a relevance head (one logit), or
    a classifier over `labels` (an NLI model: e.g. contradiction, neutral, entailment)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    vocab = {word: i for i, word in enumerate(WORDPIECE_CHARACTERS)}
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        num_labels=len(labels) if labels else 1,
        **({"id2label": dict(enumerate(labels))} if labels else {}),
    )
    torch.manual_seed(seed)
    BertForSequenceClassification(config).save_pretrained(folder)
    BertTokenizer(vocab=vocab).save_pretrained(folder)
    return folder


def _owl_vocab() -> dict[str, int]:
    """Characters with CLIP's word ends; the pad token first, as OWL masks queries whose first
    id is 0 (real OWL vocabularies begin with "!", never a query's first token)."""
    vocab = {"!": 0, "<|startoftext|>": 1, "<|endoftext|>": 2}
    characters = string.ascii_lowercase + string.digits
    vocab.update({c: len(vocab) + i for i, c in enumerate(characters)})
    vocab.update({f"{c}</w>": len(vocab) + i for i, c in enumerate(characters)})
    return vocab


def tiny_owl(folder: Path, *, v2: bool = True, seed: int = 0, base_size: bool = False) -> Path:
    """A random OWLv2 (or OWL-ViT with `v2=False`), saved like a hub checkpoint.

    The box head's last layer is zeroed, so each patch predicts the box its position implies
    (OWL's box bias): boxes of patch size tiling the image, as a trained model's are before it
    refines them, instead of the random corners an untrained head gives. `base_size=True`
    gives the real base sizes (owlv2-base-patch16, owlvit-base-patch32), for benches.
    """
    import torch
    from transformers import (
        CLIPTokenizer,
        Owlv2Config,
        Owlv2ForObjectDetection,
        Owlv2ImageProcessorPil,
        Owlv2Processor,
        OwlViTConfig,
        OwlViTForObjectDetection,
        OwlViTImageProcessorPil,
        OwlViTProcessor,
    )

    vocab = _owl_vocab()
    tokens = {"vocab_size": len(vocab), "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
    config_class = Owlv2Config if v2 else OwlViTConfig
    if base_size:  # owlv2-base-patch16 reads 960 px; OWL-ViT's defaults are base-patch32's
        vision = {"image_size": 960, "patch_size": 16} if v2 else {}
        config = config_class(text_config=tokens, vision_config=vision)
        side = config.vision_config.image_size
    else:
        layers = {
            "hidden_size": 32,
            "intermediate_size": 37,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
        }
        side = 64
        config = config_class(
            text_config={**layers, **tokens, "max_position_embeddings": 16},
            vision_config={**layers, "image_size": side, "patch_size": 16},
            projection_dim=32,  # OWL's class head maps image features to the text width
        )
    torch.manual_seed(seed)
    model = (Owlv2ForObjectDetection if v2 else OwlViTForObjectDetection)(config)
    with torch.no_grad():
        model.box_head.dense2.weight.zero_()
        model.box_head.dense2.bias.zero_()
    model.save_pretrained(folder)
    tokenizer = CLIPTokenizer(vocab=vocab, merges=[], pad_token="!", model_max_length=16)
    size = {"height": side, "width": side}
    if v2:
        processor = Owlv2Processor(Owlv2ImageProcessorPil(size=size), tokenizer)
    else:
        image_processor = OwlViTImageProcessorPil(size=size, crop_size=size)
        processor = OwlViTProcessor(image_processor, tokenizer)
    processor.save_pretrained(folder)
    return folder


def tiny_sentence_transformer(folder: Path, seed: int = 0, dense: bool = False) -> Path:
    """A sentence-transformers folder as the hub has them (modules.json, a 2-layer BERT with
    a character WordPiece vocabulary and tokenizer.json, mean pooling, normalisation);
    `dense=True` adds a Dense layer after the pooling, a shape only sentence-transformers runs."""
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertModel, BertTokenizerFast

    config = BertConfig(
        vocab_size=len(WORDPIECE_CHARACTERS),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
    )
    torch.manual_seed(seed)
    bert = folder / "bert"
    BertModel(config).save_pretrained(bert)
    vocab = bert / "vocab.txt"
    vocab.write_text("\n".join(WORDPIECE_CHARACTERS) + "\n")
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(bert)
    transformer = models.Transformer(str(bert), max_seq_length=48)
    modules = [transformer, models.Pooling(32, pooling_mode="mean")]
    if dense:
        modules.append(models.Dense(32, 16))
    SentenceTransformer(modules=[*modules, models.Normalize()], device="cpu").save(
        str(folder / "model")
    )
    return folder / "model"
