"""Agents: the ReAct agent service and its pure parts."""
