"""``BokehView``: jupyter_bokeh's widget, with a panel's changes sent to the page as one patch.

jupyter_bokeh sends every change of a shown document as its own PATCH-DOC message
(three to five comm messages each), and the page applies and redraws each in
turn. A panel that replaces five data sources per update paid five round trips
through the Jupyter server and up to five redraws: in JupyterLab on a 2-CPU
machine the last of five sources arrived 15-90 ms after the first
(``bench/model_widgets.py``). Inside :meth:`BokehView.one_patch` the changes
are collected and leave as one PATCH-DOC holding all of them, which BokehJS
applies together and draws once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jupyter_bokeh.widgets import BokehModel


class BokehView(BokehModel):
    """A bokeh layout as an ipywidget (jupyter_bokeh's ``BokehModel``) that can batch its changes.

    Where jupyter_bokeh does not have the method this relies on, changes go out one by one as before.
    """

    _held: list[Any] | None = None

    @contextmanager
    def one_patch(self) -> Iterator[None]:
        """Send the document changes made inside the block as one message when it ends (even on an error)."""
        if self._held is not None or not hasattr(BokehModel, "_document_patched"):
            yield
            return
        self._held = []
        try:
            yield
        finally:
            held, self._held = self._held, None
            if held:
                self._send_patch(held)

    def _document_patched(self, event: Any) -> None:
        if self._held is None:
            super()._document_patched(event)
        elif event.setter is not self:  # the page's own change need not go back to it
            self._held.append(event)

    def _send_patch(self, events: list[Any]) -> None:
        """The messages jupyter_bokeh sends for one event, for several (bokeh's PATCH-DOC takes a list)."""
        import json

        from bokeh.protocol import Protocol

        msg = Protocol().create("PATCH-DOC", events)
        for part in (msg.header_json, msg.metadata_json, msg.content_json):
            self.send({"msg": "patch", "payload": part})
        for buffer in msg.buffers:
            self.send({"msg": "patch", "payload": json.dumps(buffer.ref)})
            self.send({"msg": "patch"}, [buffer.to_bytes()])
