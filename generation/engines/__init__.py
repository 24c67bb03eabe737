"""Language-model engines behind one interface; backends import their libraries when chosen."""

from mmrag.generation.engines.base import ENGINES, Engine, EngineInfo, Message, load_engine

__all__ = ["ENGINES", "Engine", "EngineInfo", "Message", "load_engine"]
