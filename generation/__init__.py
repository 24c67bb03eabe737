"""mmrag: generation — language models and prompts; receives sources, never indexes.

Engines (llama.cpp in process, any OpenAI-compatible endpoint, vLLM, transformers) share one
interface; `AnswerWriter` writes the cited one-sentence answer, `LMJudge` scores relevance for
the reranker, `RationaleWriter` answers A-OKVQA. Importing this package loads no model library.
"""

from generation.engines import ENGINES, Engine, EngineInfo, Message, load_engine
from generation.errors import GenerationError
from generation.judge import LMJudge
from generation.rationale import RationaleResult, RationaleWriter
from generation.types import Answer, Citation, SourceLike
from generation.writer import AnswerWriter

__all__ = [
    "ENGINES",
    "Answer",
    "AnswerWriter",
    "Citation",
    "Engine",
    "EngineInfo",
    "GenerationError",
    "LMJudge",
    "Message",
    "RationaleResult",
    "RationaleWriter",
    "SourceLike",
    "load_engine",
]
