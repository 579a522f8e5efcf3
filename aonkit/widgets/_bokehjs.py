"""Make sure BokehJS is on the notebook page before a bokeh widget renders, loaded inline (never a CDN).

jupyter_bokeh's widget view calls ``window.Bokeh``; it does not bring BokehJS
itself. So the first aonkit widget shown in a kernel session first displays
bokeh's notebook loader with ``INLINE`` resources (the same output as
``bokeh.io.output_notebook(INLINE)``), in the same cell, just before the
widget. Later widgets find BokehJS already there.
"""

from __future__ import annotations

_loaded = False


def ensure_bokehjs() -> None:
    """Display the inline BokehJS loader once per kernel session (no-op outside IPython)."""
    global _loaded
    if _loaded:
        return
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - widgets need IPython anyway
        return
    if get_ipython() is None:
        return
    from bokeh.io import output_notebook
    from bokeh.resources import INLINE

    output_notebook(resources=INLINE, hide_banner=True)
    _loaded = True
