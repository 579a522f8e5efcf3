"""The canvas timeline's ES module in a Chromium page, with a stand-in for anywidget's model (tests only).

:class:`Recorded` is the widget with what it sends kept; :func:`open_page` loads the module from a data URL
(nothing fetched); :func:`render` draws a :class:`~aonkit.widgets.timeline.TimelineCanvas`'s state and its last
glyphs there. The stand-in model keeps what
the page does: ``window.state`` (the traits as the page set them), ``window.saved`` (each view it saved),
``window.sent`` (its custom messages), ``window.handlers`` (to deliver more messages), ``window.el``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aonkit.widgets.timeline import TimelineCanvas


class Recorded(TimelineCanvas):
    """The widget with the messages it sends kept (the comm is the only thing replaced)."""

    def send(self, content, buffers=None):  # type: ignore[override]
        self.sent = [*getattr(self, "sent", []), (content, buffers)]

    def tiles(self) -> tuple[dict, list]:
        """The last glyphs sent."""
        return [m for m in self.sent if m[0]["kind"] == "tiles"][-1]


STATE = ("geometry", "lanes", "groups", "critical", "span_ms", "width_px", "view", "legend", "title", "focus")
"""The synced traits the page reads."""

RENDER = """([state, msg, bufs]) => {
  const host = document.getElementById('host');
  host.replaceChildren();
  const el = document.createElement('div');
  host.appendChild(el);
  const handlers = {};
  window.handlers = handlers;
  window.sent = []; window.saved = [];
  const model = {get: (k) => state[k], on: (ev, cb) => { handlers[ev] = cb; }, off: () => {},
                 set: (k, v) => { state[k] = v; }, save_changes: () => window.saved.push(state.view.slice()),
                 send: (m) => window.sent.push(m)};
  window.state = state;
  window.aon.default.render({model, el});
  const buffers = bufs.map((b) => { const s = atob(b), u = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) u[i] = s.charCodeAt(i); return new DataView(u.buffer); });
  handlers['msg:custom'](msg, buffers);
  window.el = el;
  return new Promise((r) => requestAnimationFrame(() => r({...el.dataset})));
}"""


@contextmanager
def open_page() -> Iterator[Any]:
    """A Chromium page with the timeline's module as ``window.aon``; no page error or blocked request allowed."""
    from aonkit.widgets.timeline import ESM
    from tests.browser import browser_page

    url = "data:text/javascript;base64," + base64.b64encode(ESM.encode()).decode()
    with browser_page() as (pg, blocked):
        pg.set_content("<html><body><div id='host'></div></body></html>")
        pg.add_style_tag(path=str(Path(__file__).resolve().parent.parent / "widgets" / "timeline.css"))
        pg.evaluate(f"async () => {{ window.aon = await import({url!r}); }}")
        yield pg
        assert not blocked and not pg.aonkit_errors, (blocked, pg.aonkit_errors)


def render(page: Any, w: Any) -> dict:
    """Draw widget ``w`` (its traits and the last glyphs it sent; ``w.sent`` holds what it sent) in ``page``.

    Returns the element's dataset after the first frame.
    """
    state = {k: getattr(w, k) for k in STATE}
    msg, buffers = [m for m in w.sent if m[0]["kind"] == "tiles"][-1]
    return page.evaluate(RENDER, [state, msg, [base64.b64encode(b).decode() for b in buffers]])
