"""Renderers of analysis results: plain text and self-contained HTML."""

from .text import format_summary

__all__ = ["format_summary"]
