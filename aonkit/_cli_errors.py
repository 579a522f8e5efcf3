"""The one line ``aonkit`` prints for an error the user can fix: the file, what went wrong, what to do."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .errors import AonkitError, TraceFormatError

_ADVICE = ("delete", "re-create", "raise it", "rerun", "pass ", "load them", "needs ")


def error_line(exc: BaseException, salvage: bool = False, inputs: Sequence[str] = ()) -> str | None:
    """The one-line message (the file, what went wrong, what to do) for an error the user can fix; None for others.

    Parameters
    ----------
    exc : BaseException
        What a command raised.
    salvage : bool
        Whether ``--salvage`` was given (a truncated file is then not an error to suggest it for).
    inputs : sequence of str
        The command's input paths, named for errors that do not name their file (pyarrow's).

    Returns
    -------
    str or None
        The message without the ``aonkit: error:`` prefix, newlines folded; None when ``exc`` is a bug to report.
    """
    if isinstance(exc, TraceFormatError):
        text = str(exc)
        if "truncated" in exc.reason and not salvage:
            text += "; rerun with --salvage to keep the complete events before the cut"
        elif exc.reason.startswith("cannot read the file"):
            text += "; check that it exists and is readable"
        elif not any(word in text.lower() for word in _ADVICE):
            text += "; give a complete profiler trace (Kineto/Chrome JSON, nsys .sqlite or .nsys-rep) or aonkit cache"
    elif isinstance(exc, AonkitError):
        text = str(exc)
    elif isinstance(exc, OSError):
        what = f"{exc.filename}: {exc.strerror}" if exc.filename is not None and exc.strerror else str(exc)
        if isinstance(exc, FileNotFoundError):
            advice = "check the path"
        elif isinstance(exc, PermissionError):
            advice = "check the permissions"
        elif isinstance(exc, (FileExistsError, IsADirectoryError, NotADirectoryError)):
            advice = "give another path"
        else:
            advice = "check the path and the free space"
        text = f"{what}; {advice}"
    elif "pyarrow" in sys.modules and isinstance(exc, sys.modules["pyarrow"].lib.ArrowException):
        where = f" in {', '.join(inputs)}" if inputs else ""
        text = f"unreadable Parquet data{where} ({type(exc).__name__}: {exc}); delete the cache or re-create it"
    else:
        return None
    return " ".join(text.split())
