"""Check a matplotlib figure for text that collides: the layout test of every figure hetsched writes.

:func:`overlapping_text` draws the figure with Agg, records the box of every piece of text
that is actually drawn (titles, axis labels, tick labels, legend entries, annotations,
figure texts, suptitle and caption) and of every legend, and reports

* two boxes that overlap by more than ``tol`` pixels both ways (a legend over a title, a
  caption over an axis label, labels of two panels running into each other);
* two tick labels of one axis closer than ``tick_gap`` pixels (x ticks that run together);
* text or a legend reaching more than ``tol`` pixels past the figure's edge (cut off);
* a legend over the data area of an axes (bars or lines hidden behind it), unless
  ``legends_inside``.

Boxes are axis-aligned, so rotated text counts by its enclosing rectangle. Text drawn twice
at the same place (the same label on a shared axis, say) is one box. A legend's own texts
are not compared with its frame::

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hetsched.sim.figure_check import overlapping_text

    fig, ax = plt.subplots(layout="constrained")
    ax.plot([0, 1], label="a line")
    ax.set_title("a title")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1))
    assert overlapping_text(fig) == []
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .figure_layout import check_figure

__all__ = ["TextBox", "overlapping_text", "text_boxes"]


@dataclass(frozen=True)
class TextBox:
    """One drawn box, in display pixels (origin bottom left).

    Attributes
    ----------
    name : str
        What it is, for messages: ``"title 'x' (axes 0)"``, ``"legend (figure)"``...
    x0, y0, x1, y1 : float
        The box.
    group : tuple
        Boxes of one group are compared by ``tick_gap`` (the tick labels of one axis).
    owner : int
        ``id`` of the legend a text belongs to (0 for none): not compared with that legend.
    kind : str
        ``"text"``, ``"legend"`` (a legend's frame) or ``"axes"`` (an axes' data area, only
        compared with legends).
    """

    name: str
    x0: float
    y0: float
    x1: float
    y1: float
    group: tuple = ()
    owner: int = 0
    kind: str = "text"

    def overlap(self, other: TextBox) -> tuple[float, float]:
        """Widths of the intersection along x and y (negative: the gap between them)."""
        return (min(self.x1, other.x1) - max(self.x0, other.x0),
                min(self.y1, other.y1) - max(self.y0, other.y0))


@contextmanager
def _recording_text(drawn: dict[int, Any]) -> Iterator[None]:
    """While open, every Text that draws itself is recorded as ``id -> (text, renderer)``."""
    from matplotlib.text import Text

    original = Text.draw

    @functools.wraps(original)
    def draw(self: Text, renderer: Any) -> None:
        original(self, renderer)
        if self.get_visible() and self.get_text().strip():
            drawn[id(self)] = (self, renderer)

    Text.draw = draw
    try:
        yield
    finally:
        Text.draw = original


def _roles(fig: Any) -> dict[int, tuple[str, tuple, int]]:
    """``id(text) -> (role, group, legend id)`` for the texts a figure knows by name."""
    roles: dict[int, tuple[str, tuple, int]] = {id(t): ("figure text", (), 0) for t in fig.texts}
    for name in ("_suptitle", "_supxlabel", "_supylabel"):
        t = getattr(fig, name, None)
        if t is not None:
            roles[id(t)] = (name.strip("_"), (), 0)
    legends = [(leg, "figure") for leg in fig.legends]
    for i, ax in enumerate(fig.axes):
        where = f"axes {i}"
        for title in (ax.title, ax._left_title, ax._right_title):
            roles[id(title)] = (f"title ({where})", (), 0)
        for key, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            roles[id(axis.label)] = (f"{key} label ({where})", (), 0)
            roles[id(axis.offsetText)] = (f"{key} offset text ({where})", (), 0)
            for tick in (*axis.majorTicks, *axis.minorTicks):
                for side, label in (("1", tick.label1), ("2", tick.label2)):
                    roles[id(label)] = (f"{key} tick label ({where})", (id(axis), side), 0)
        for t in ax.texts:
            roles[id(t)] = (f"text ({where})", (), 0)
        if ax.get_legend() is not None:
            legends.append((ax.get_legend(), where))
    for leg, where in legends:
        for t in (*leg.get_texts(), leg.get_title()):
            roles[id(t)] = (f"legend text ({where})", (), id(leg))
    return roles


def text_boxes(fig: Any, *, dpi: float | None = None) -> tuple[list[TextBox], Any]:
    """Draw ``fig`` with Agg and return the box of every drawn text and legend, and the
    figure's box.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    dpi : float, optional
        Draw at this resolution (as ``savefig(dpi=...)`` would); default the figure's.

    Returns
    -------
    (list of TextBox, matplotlib.transforms.Bbox)
        The drawn texts, the legends and the visible axes' data areas; the figure's box.

    Raises
    ------
    ValidationError
        ``fig`` is not a matplotlib Figure.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    check_figure(fig)
    old_canvas, old_dpi = fig.canvas, fig.dpi
    canvas = old_canvas if isinstance(old_canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    drawn: dict[int, Any] = {}
    try:
        if dpi is not None:
            fig.set_dpi(dpi)
        with _recording_text(drawn):
            canvas.draw()
        roles = _roles(fig)
        boxes = []
        seen = set()
        for key, (text, renderer) in drawn.items():
            bb = text.get_window_extent(renderer)
            role, group, owner = roles.get(key, ("text", (), 0))
            where = (text.get_text(), round(bb.x0), round(bb.y0), round(bb.x1), round(bb.y1))
            if where in seen:
                continue
            seen.add(where)
            boxes.append(TextBox(f"{role} {text.get_text()!r}", bb.x0, bb.y0, bb.x1, bb.y1, group, owner))
        legends = [(leg, "figure") for leg in fig.legends]
        legends += [(ax.get_legend(), f"axes {i}") for i, ax in enumerate(fig.axes) if ax.get_legend() is not None]
        for leg, where in legends:
            if leg.get_visible():
                bb = leg.get_window_extent(canvas.get_renderer())
                boxes.append(TextBox(f"legend ({where})", bb.x0, bb.y0, bb.x1, bb.y1, owner=id(leg), kind="legend"))
        for i, ax in enumerate(fig.axes):
            if ax.get_visible() and ax.axison:
                bb = ax.get_window_extent()
                boxes.append(TextBox(f"data area (axes {i})", bb.x0, bb.y0, bb.x1, bb.y1, kind="axes"))
        return boxes, fig.bbox.frozen()
    finally:
        if dpi is not None:
            fig.set_dpi(old_dpi)
        if canvas is not old_canvas:
            fig.set_canvas(old_canvas)


def overlapping_text(fig: Any, *, tol: float = 1.0, tick_gap: float = 2.0, legends_inside: bool = False,
                     dpi: float | None = None) -> list[tuple[str, str]]:
    """Pairs of things in ``fig`` that collide; empty when nothing does.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    tol : float, default 1.0
        Pixels two boxes may share (both ways) before they count as overlapping, and that
        a box may reach past the figure's edge.
    tick_gap : float, default 2.0
        Least gap, in pixels, between two tick labels of one axis.
    legends_inside : bool, default False
        Allow legends over an axes' data area (by default a legend must sit outside).
    dpi : float, optional
        Draw at this resolution (default the figure's).

    Returns
    -------
    list of (str, str)
        One pair of names per collision; ``(name, "outside the figure")`` for a box cut off
        at the edge, ``(legend, "data area (axes i)")`` for a legend over an axes.

    Raises
    ------
    ValidationError
        ``fig`` is not a matplotlib Figure.
    """
    boxes, page = text_boxes(fig, dpi=dpi)
    found: list[tuple[str, str]] = []
    for i, a in enumerate(boxes):
        if a.kind != "axes" and (a.x0 < page.x0 - tol or a.y0 < page.y0 - tol or a.x1 > page.x1 + tol
                                 or a.y1 > page.y1 + tol):
            found.append((a.name, "outside the figure"))
        for b in boxes[i + 1:]:
            if _collide(a, b, tol, tick_gap, legends_inside):
                found.append((a.name, b.name))
    return found


def _collide(a: TextBox, b: TextBox, tol: float, tick_gap: float, legends_inside: bool) -> bool:
    """Whether two boxes count as colliding (see :func:`overlapping_text`)."""
    if "axes" in (a.kind, b.kind):
        if legends_inside or {a.kind, b.kind} != {"axes", "legend"}:
            return False
    elif a.owner and a.owner == b.owner:
        return False
    dx, dy = a.overlap(b)
    if a.group and a.group == b.group:
        return dx > -tick_gap and dy > -tick_gap
    return dx > tol and dy > tol
