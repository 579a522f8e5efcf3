"""Exception types raised by aonkit."""

from __future__ import annotations

import sys
import warnings


class AonkitError(Exception):
    """Base class of every aonkit error."""


class TraceFormatError(AonkitError, ValueError):
    """A trace file is malformed, truncated or not a trace at all.

    The message is ``message`` followed by the given locations in parentheses, e.g. ``"bad JSON (t.json, byte
    12, line 1, column 13, event 0)"``.

    Parameters
    ----------
    message : str
        What is wrong; kept as ``reason``.
    path : str, optional
        The file that was read.
    offset : int, optional
        Byte offset (in the decompressed text) where the problem was found.
    line, column : int, optional
        1-based line and column of ``offset``; ``column`` is shown only when ``line`` is given.
    event_index : int, optional
        Index of the event being read when the problem was found.

    Attributes
    ----------
    path : str or None
        The file that was read.
    offset : int or None
        Byte offset (in the decompressed text) where the problem was found.
    line, column : int or None
        1-based line and column of ``offset``.
    event_index : int or None
        Index of the event being read when the problem was found.
    reason : str
        ``message`` without the locations.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        offset: int | None = None,
        line: int | None = None,
        column: int | None = None,
        event_index: int | None = None,
    ) -> None:
        self.path = path
        self.offset = offset
        self.line = line
        self.column = column
        self.event_index = event_index
        where = []
        if path is not None:
            where.append(str(path))
        if offset is not None:
            where.append(f"byte {offset}")
        if line is not None:
            where.append(f"line {line}, column {column}")
        if event_index is not None:
            where.append(f"event {event_index}")
        self.reason = message
        super().__init__(f"{message} ({', '.join(where)})" if where else message)

    def __reduce__(self) -> tuple:
        """Pickle with its fields, so an error raised in a worker process arrives whole."""
        fields = {"path": self.path, "offset": self.offset, "line": self.line, "column": self.column,
                  "event_index": self.event_index}  # fmt: skip
        return (_rebuild, (type(self), self.reason, fields))


class TraceTooLargeError(TraceFormatError):
    """A compressed trace expands beyond the configured cap."""


class JobError(AonkitError, ValueError):
    """Trace files do not form one job: two claim one rank, or they come from different runs."""


class MissingInputError(AonkitError, ValueError):
    """A trace lacks what an analysis needs (a known GPU, samples of a metric); the message says what to pass."""


class AonkitWarning(UserWarning):
    """Data was dropped, altered or chosen on the user's behalf (the message says what and where)."""


def _rebuild(cls: type, message: str, fields: dict) -> TraceFormatError:
    return cls(message, **fields)


def user_stacklevel() -> int:
    """``stacklevel`` for a ``warnings.warn`` made by the caller of this function: its first frame outside aonkit."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_globals.get("__name__", "").startswith("aonkit."):
        frame, level = frame.f_back, level + 1
    return level


def warn_user(message: str) -> None:
    """Issue ``message`` as an :class:`AonkitWarning` at the user's line (never trace metadata in it)."""
    warnings.warn(message, AonkitWarning, stacklevel=user_stacklevel())
