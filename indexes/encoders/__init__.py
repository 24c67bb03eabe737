"""Encoders shared by index build and query time, so both sides embed the same way.

Heavy libraries (torch, transformers, sentence-transformers, open_clip) are imported inside the
loaders, never at module import, so the CLI and the service start fast.
"""

from mmrag.indexes.encoders.base import EncoderInfo, TextEncoder

__all__ = ["EncoderInfo", "TextEncoder"]
