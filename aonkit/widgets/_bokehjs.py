"""Make sure BokehJS is on the notebook page before a bokeh widget renders, loaded inline (never a CDN).

jupyter_bokeh's widget view calls ``window.Bokeh``; it does not bring BokehJS
itself. So the first aonkit widget shown to a front end first displays
BokehJS inline, in the same cell, just before the widget. Later widgets find
BokehJS already there. A front end is known by the session id in the header
of the request that displays the widget: a reloaded page, or a second tab on
the same kernel, is a new session and gets BokehJS again (the kernel cannot
know that the old page is gone).

``bokeh.io.output_notebook`` publishes the 4 MB BokehJS bundle twice in one
output (as ``application/javascript`` for the classic notebook and as
jupyter_bokeh's ``application/vnd.bokehjs_load.v0+json`` for JupyterLab), so a
saved notebook carries it twice. aonkit's widgets need jupyter_bokeh, whose
JupyterLab extension renders the second form, so only that one is published.
Where bokeh's internals differ from what this expects, it falls back to
``output_notebook``.
"""

from __future__ import annotations

from typing import Any

_loaded: set[str] = set()
"""The front-end sessions BokehJS has been displayed to."""

LOAD_MIME = "application/vnd.bokehjs_load.v0+json"
"""The mime type jupyter_bokeh's JupyterLab extension evaluates to load BokehJS."""


def bokehjs_load_bundle() -> dict[str, Any] | None:
    """The display data that loads BokehJS inline in JupyterLab, once; ``None`` where bokeh cannot make it."""
    try:
        from bokeh.embed.bundle import bundle_for_objs_and_resources
        from bokeh.io import notebook as nb
        from bokeh.resources import INLINE

        js = nb._loading_js(bundle_for_objs_and_resources(None, INLINE), None, 5000, register_mime=False)
    except (ImportError, AttributeError, TypeError):
        return None
    if getattr(nb, "LOAD_MIME_TYPE", LOAD_MIME) != LOAD_MIME:
        return None
    nb._NOTEBOOK_LOADED = INLINE  # bokeh's own show() then knows BokehJS is on the page
    return {LOAD_MIME: js}


def client_session(shell: Any) -> str:
    """The session id of the front end whose request the kernel is running ("" when there is none)."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None or not hasattr(kernel, "get_parent"):
        return ""
    try:
        parent = kernel.get_parent("shell")
    except TypeError:  # ipykernel < 6.9 takes no channel
        parent = kernel.get_parent()
    return str(((parent or {}).get("header") or {}).get("session") or "")


def ensure_bokehjs() -> None:
    """Display the inline BokehJS loader once per front-end session (no-op outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - widgets need IPython anyway
        return
    shell = get_ipython()
    if shell is None:
        return
    session = client_session(shell)
    if session in _loaded:
        return
    from IPython.display import publish_display_data

    data = bokehjs_load_bundle()
    if data is None:
        from bokeh.io import output_notebook
        from bokeh.resources import INLINE

        output_notebook(resources=INLINE, hide_banner=True)
    else:
        publish_display_data(data)
    _loaded.add(session)


class TextWidget:
    """Mixin for an ipywidget with a plain-text form.

    :meth:`plain_text`, when it returns text, is ``text/plain`` (what a terminal, a log or a notebook without
    widgets shows). Put it first among the bases (``class LLMModelPanel(TextWidget, w.VBox)``).
    """

    def plain_text(self) -> str | None:
        """The widget in one line of text (None: ipywidgets' default)."""
        return None

    def _repr_mimebundle_(self, **kwargs: object) -> dict:
        bundle = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]
        text = self.plain_text()
        if text is not None and bundle is not None:
            bundle["text/plain"] = text
        return bundle


class BokehWidget(TextWidget):
    """Mixin for an ipywidget that shows bokeh models: BokehJS goes out before the widget's first display.

    Put it first among the bases (``class Dashboard(BokehWidget, w.VBox)``); it has :class:`TextWidget`'s
    plain-text form.
    """

    def _repr_mimebundle_(self, **kwargs: object) -> dict:
        ensure_bokehjs()
        return super()._repr_mimebundle_(**kwargs)


def bokeh_model(root: Any, synced: Any = ()) -> Any:
    """A jupyter_bokeh widget of ``root`` whose data sources go one way, from the kernel to the page.

    jupyter_bokeh's page side sends every change of its document back to the kernel, those the kernel's own
    patches made included: each new set of glyphs came back whole (encoded, base64, through the server) to be
    decoded and validated again in the kernel, and so did what the page's callbacks compute (the bars' labels,
    the highlight). aonkit's Python reads none of that. Every ``ColumnDataSource`` and ``Selection`` under
    ``root`` is made ``syncable=False``: BokehJS then makes no change event for them, so nothing is sent back,
    while the kernel's changes still reach the page. Ranges stay synced, and so do the models in ``synced`` (the
    selections of tables whose picks the kernel acts on: their row numbers come back, nothing else).
    """
    from bokeh.models import ColumnDataSource, Selection
    from jupyter_bokeh.widgets import BokehModel

    keep = {m.id for m in synced}
    for m in root.references():
        if isinstance(m, (ColumnDataSource, Selection)):
            m.syncable = m.id in keep
    return BokehModel(root)
