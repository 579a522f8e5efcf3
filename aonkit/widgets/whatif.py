"""``WhatIfPanel``: sliders that re-time a trace's dependency graph and show the step time and critical path.

Each slider scales one part of the work (GPU computation, communication,
copies, launch calls, other CPU time, untraced host gaps); a free row scales
the events whose name matches a pattern. A change re-times the graph in one
pass (10 ms on 1M nodes, ``bench/RESULTS.md``) and updates the numbers and the
composition bars (canvas charts, :mod:`aonkit.widgets.charts`; their spec and data in :mod:`aonkit.views.whatif`;
the bars need only the path's time by part, :meth:`WhatIf.composition`) at once, and, once the
sliders rest, the re-timed timeline (:meth:`WhatIf.retimed_trace` drawn by the
live timeline, the critical path outlined; annotations such as ``ProfilerStep``
move with the work they enclose, instants keep their measured times).

In a kernel a change is re-timed :data:`COALESCE_S` after it arrives, with the values that arrived meanwhile
(:class:`~aonkit.widgets._loop.Latest`): on a large trace a dragged slider is answered as often as the re-time
allows and never falls behind. Reading ``result`` first re-times a change still waiting, so a cell that sets a
slider and reads the result sees the new answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ipywidgets as w
import traitlets

from ..analysis.critical_path import Rule, WhatIf, what_if
from ..analysis.whatif_batch import batch_rules, batch_scales
from ..analysis.whatif_batch_memory import batch_memory, fullest
from ..analysis.whatif_hardware import hardware_rules, hardware_scales
from ..analysis.whatif_rules import PARTS
from ..model.hardware import devices
from ..trace import Trace
from ..units import fmt_ns
from ..views.whatif import composition_chart, composition_data
from ._bokehjs import TextWidget
from ._loop import Debounce, Latest
from .charts import Charts
from .timeline import TimelineCanvas

SLIDERS: dict[str, dict[str, Any]] = {name: rule for name, (_, rule) in PARTS.items()}
"""The sliders and the rule each one sets (its value is the scale): :data:`~aonkit.analysis.whatif_rules.PARTS`."""
BATCHES = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
"""The "batch x" slider's multiples of the measured batch."""


COALESCE_S = 0.005
"""In a kernel, a change is re-timed this long after it arrives, together with those that arrived meanwhile (a
dragged slider's messages): on a large trace the panel answers as often as it can and never falls behind."""


class WhatIfPanel(TextWidget, w.VBox):
    """What-if sliders over a trace or a job, optionally one ProfilerStep.

    Parameters
    ----------
    trace : Trace or TraceSet
        A trace, or a job's ranks (then a rank picker and its own GPU-compute
        slider: what if that rank, e.g. the straggler, were faster). A "run on"
        picker re-times the GPU work for another GPU
        (:mod:`aonkit.analysis.whatif_hardware`), a "batch x" slider for a multiple of the measured batch
        (:mod:`aonkit.analysis.whatif_batch`, throughput shown); the sliders apply on top.
    step : int, optional
        A ``ProfilerStep#N`` to time (default: the whole trace).
    scope : {"start", "launched"}
        What the step holds (:func:`~aonkit.analysis.critical_path.what_if`): what starts in it, or its host
        work and the GPU work it launched. With two steps or more the summary also gives the median step
        period (the run's cadence) before and after.
    timeline : bool
        Show the re-timed trace under the bars (``self.timeline``, a
        :class:`~aonkit.widgets.timeline.TimelineCanvas` with the critical path outlined), redrawn after the
        sliders rest.
    compare : bool
        Also show the step as measured (the model with no change, so its lanes and clock are the re-timed one's)
        above the re-timed timeline (``self.measured``), their views linked in the page: a zoom or pan of
        either moves both.
    width_px : int
        Width of the timeline.
    debounce_s : float
        Quiet time after the last slider move before the timeline is redrawn.
    """

    def __init__(self, trace: Trace | Mapping[int, Trace], step: int | None = None, *, scope: str = "start",
                 timeline: bool = True, compare: bool = False, width_px: int = 1000,
                 debounce_s: float = 0.3) -> None:  # fmt: skip
        self.trace, self.step, self.scope = trace, step, scope
        ranks = sorted(trace) if not isinstance(trace, Trace) else []
        self.rank = w.Dropdown(options=ranks, value=ranks[0] if ranks else None, description="rank",
                               layout=w.Layout(display="" if ranks else "none"))
        self.rank_scale = w.FloatSlider(value=1.0, min=0.0, max=2.0, step=0.05, description="its GPU compute",
                                        readout_format=".2f", style={"description_width": "140px"},
                                        layout=w.Layout(display="" if ranks else "none"))
        self.sliders = {name: w.FloatSlider(value=1.0, min=0.0, max=2.0, step=0.05, description=name,
                                            continuous_update=True, readout_format=".2f",
                                            style={"description_width": "140px"}, layout=w.Layout(width="420px"))
                        for name in SLIDERS}  # fmt: skip
        self.pattern = w.Text(value="", placeholder="name regex, e.g. ^aten::mm$", description="events named",
                              style={"description_width": "140px"})
        self.pattern_scale = w.FloatSlider(value=1.0, min=0.0, max=2.0, step=0.05, description="scale",
                                           readout_format=".2f")
        self.device = w.Dropdown(options=["as measured", *(d.name for d in devices())], value="as measured",
                                 description="run on", style={"description_width": "140px"})
        self._hardware: dict[str, list[Rule]] = {}
        self.batch = w.SelectionSlider(options=BATCHES, value=1.0, description="batch x",
                                       style={"description_width": "140px"})  # fmt: skip
        self._batch: dict[float, list[Rule]] = {}
        self._mem = None
        self._result: WhatIf = what_if(trace, step=step, scope=scope)
        self._request = Latest(self.update, COALESCE_S)
        self.view = Charts([composition_chart()], {"composition": composition_data(self._result.composition())})
        self.source = self.view.sources["composition"]
        self.summary = w.HTML()
        for s in (*self.sliders.values(), self.pattern_scale, self.rank_scale, self.rank, self.device, self.batch):
            s.observe(self._changed, names="value")
        self.pattern.observe(self._changed, names="value")
        self._show()
        parts = [w.HBox([w.VBox(list(self.sliders.values())),
                         w.VBox([self.device, self.batch, self.pattern, self.pattern_scale, self.rank,
                                 self.rank_scale, self.summary])]),
                 self.view]  # fmt: skip
        self.timeline: TimelineCanvas | None = None
        self.measured: TimelineCanvas | None = None
        self._link: w.Widget | None = None
        if timeline:
            self.timeline = self._new_timeline(self._result.retimed_trace(), width_px)
            self._redraw = Debounce(self.refresh_timeline, debounce_s)
            if compare:  # no rule yet: the result is the model of the step as measured
                self.measured = TimelineCanvas(self._result.retimed_trace(), width_px=width_px,
                                               title="as measured (the model with no change); critical path outlined")
                self.measured.outline(self.measured.trace, self._result.critical_path)
                parts.append(self.measured)
                self._link_pair()
            parts.append(self.timeline)
        super().__init__(parts)

    def rules(self) -> list[Rule]:
        """The rules the widgets set now (sliders left at 1 add none; another GPU's and the batch's come first)."""
        out = [*self._device_rules(), *self._batch_rules()]
        out += [Rule(s.value, **SLIDERS[name]) for name, s in self.sliders.items() if s.value != 1.0]
        if self.pattern.value and self.pattern_scale.value != 1.0:
            out.append(Rule(self.pattern_scale.value, name=self.pattern.value))
        if self.rank.value is not None and self.rank_scale.value != 1.0:
            out.append(Rule(self.rank_scale.value, kind="gpu", gpu_class="computation", rank=self.rank.value))
        return out

    def _device_rules(self) -> list[Rule]:
        """The chosen GPU's rules (:func:`~aonkit.analysis.whatif_hardware.hardware_rules`), made once per GPU."""
        name = self.device.value
        if name == "as measured":
            return []
        if name not in self._hardware:
            self._hardware[name] = hardware_rules(hardware_scales(self.trace, name))
        return self._hardware[name]

    def _batch_rules(self) -> list[Rule]:
        """The batch multiple's rules (:func:`~aonkit.analysis.whatif_batch.batch_rules`), made once per multiple."""
        k = float(self.batch.value)
        if k == 1.0:
            return []
        if k not in self._batch:
            self._batch[k] = batch_rules(batch_scales(self.trace, k))
        return self._batch[k]

    def _memory(self) -> Any:
        """:func:`~aonkit.analysis.whatif_batch_memory.batch_memory` at the measured batch, read once."""
        if self._mem is None:
            self._mem = batch_memory(self.trace, 1.0)
        return self._mem

    @property
    def result(self) -> WhatIf:
        """The last re-time (:class:`~aonkit.analysis.critical_path.WhatIf`); a change still waiting is made first."""
        self._request.flush()
        return self._result

    def update(self) -> WhatIf:
        """Re-time with the current rules and refresh the numbers and bars; return the result."""
        self._request.cancel()  # this update applies any change still waiting
        try:
            self._result = what_if(self.trace, self.rules(), step=self.step, scope=self.scope)
        except Exception as exc:  # a bad pattern, a trace whose GPU is unknown: say so, keep the last result
            self.summary.value = f"<b>cannot apply</b>: {type(exc).__name__}: {exc}"
            return self._result
        self.source.data = composition_data(self._result.composition())
        self._show()
        if self.timeline is not None:
            self._redraw()
        return self._result

    def refresh_timeline(self) -> None:
        """Draw the current result's re-timed trace in the timeline now (slider moves do it once they rest)."""
        if self.timeline is None:
            return
        trace = self.result.retimed_trace()
        try:
            with self.timeline.hold_sync():  # the new outline and the new span reach the page together
                self.timeline.retime(trace)
                self.timeline.outline(trace, self.result.critical_path)
        except ValueError:  # the lanes changed (e.g. an op scaled to nothing): a new timeline in its place
            old = self.timeline
            self.timeline = self._new_timeline(trace, old.width_px)
            if self._link is not None:
                self._link.close()
                self._focus_link.unlink()
            self.timeline.focus = list(old.focus)
            if self._link is not None:
                self._link_pair()
            self.children = (*self.children[:-1], self.timeline)
            old.close()

    def _link_pair(self) -> None:
        """The measured and re-timed timelines move together in the page and share their focus (in the kernel)."""
        self._link = w.jslink((self.measured, "view"), (self.timeline, "view"))
        self._focus_link = traitlets.link((self.measured, "focus"), (self.timeline, "focus"))

    def _new_timeline(self, trace: Trace, width_px: int) -> TimelineCanvas:
        """The re-timed trace's timeline, with the current critical path outlined (``timeline.critical``)."""
        view = TimelineCanvas(trace, width_px=width_px,
                              title="re-timed timeline (a model, not a measurement); critical path outlined")
        view.outline(trace, self._result.critical_path)
        return view

    def _changed(self, change: dict) -> None:
        self._request()

    def _show(self) -> None:
        r = self._result
        text = (f"step time <b>{fmt_ns(r.step_time_ns)}</b> (model {fmt_ns(r.model_ns)}, measured "
                f"{fmt_ns(r.measured_ns)}); speed-up <b>{r.speedup:.3f}x</b>")
        if self.device.value != "as measured":
            text += f"<br>GPU work re-timed for {self.device.value} by the two rooflines"
        k = float(self.batch.value)
        if k != 1.0 and r.step_time_ns > 0:
            text += (f"<br>batch x{k:g}: throughput (samples/s) <b>x{k * r.model_ns / r.step_time_ns:.3f}</b> "
                     "(parameter work and gradient collectives kept)")  # fmt: skip
            peak, cap = fullest(self._memory(), k)
            if peak >= 0:
                text += f"; peak GPU memory {peak / 1e9:.1f} GB" + (f" of {cap / 1e9:.1f}" if cap > 0 else "")
                text += " <b>(does not fit)</b>" if 0 < cap < peak else ""
        period, model = r.periods_ns
        if period > 0 and model > 0:
            text += (f"<br>step period (median) <b>{fmt_ns(period)}</b> (model {fmt_ns(model)}); "
                     f"<b>{model / period:.3f}x</b>")  # fmt: skip
        self.summary.value = text

    def plain_text(self) -> str:
        """The re-timed step and the speed-up, in one line."""
        r = self.result
        return f"what-if: step {r.step_time_ns:,} ns, speed-up {r.speedup:.3f}x"
