"""Agent patterns beside ReAct: plan-then-execute, supervisor, and the router that picks one."""

from .orchestrator import AgentOrchestrator
from .replies import PATTERNS, PatternReplyError, PlanStep, parse_goals, parse_pattern_choice, parse_plan

__all__ = ["AgentOrchestrator", "PATTERNS", "PatternReplyError", "PlanStep", "parse_goals", "parse_pattern_choice",
           "parse_plan"]
