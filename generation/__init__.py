"""mmrag: generation — language models and prompts; receives sources, never indexes.

Engines (llama.cpp in process, any OpenAI-compatible endpoint, vLLM, transformers) share one
interface; `AnswerWriter` writes the cited one-sentence answer, `LMJudge` scores relevance for
the reranker, `RationaleWriter` answers A-OKVQA. Importing this package loads no model library.
"""

from mmrag.generation.engines import ENGINES, Engine, EngineInfo, Message, load_engine
from mmrag.generation.errors import GenerationError
from mmrag.generation.judge import LMJudge
from mmrag.generation.rationale import RationaleResult, RationaleWriter
from mmrag.generation.types import Answer, Citation, SourceLike
from mmrag.generation.writer import AnswerWriter

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
