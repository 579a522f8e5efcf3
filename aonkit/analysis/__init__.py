"""Pure functions from trace tables to result tables."""

from .summary import TraceSummary, summarize

__all__ = ["TraceSummary", "summarize"]
