"""The ReAct agent: think / act (tool) / observe loops, then a conclusion."""

from .parser import FinalAnswer, ReactParseError, ReactStep, parse_react

__all__ = ["FinalAnswer", "ReactParseError", "ReactStep", "parse_react"]
