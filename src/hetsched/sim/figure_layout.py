"""Layout pieces shared by hetsched's figures, so that no text overlaps (the figures use
constrained layout, and :mod:`hetsched.sim.figure_check` verifies the result):

* :func:`caption`: the setup in a line (or a few) under the figure, where constrained layout
  makes room for it (``Figure.supxlabel``);
* :func:`legend_outside` / :func:`figure_legend`: legends right of the axes, never over the
  data, the title or the caption;
* :func:`dodge`: small sideways offsets so the error bars of several series at one x do
  not cover each other;
* :func:`wrap_label`: category names broken onto lines so neighbouring tick labels do not
  run together;
* :func:`plain_log_labels`: a log axis labelled ``0.1 1 10`` (and ``2 3 5`` between when
  it spans less than a decade) instead of wide ``3×10⁰`` labels that collide.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ValidationError

__all__ = ["caption", "check_figure", "dodge", "dodge_step", "figure_legend", "legend_outside", "plain_log_labels", "wrap_label"]

#: Average width of a character as a fraction of the font size (DejaVu Sans, a little generous).
_CHAR_EM = 0.6
#: Legend labels longer than this are wrapped (a legend beside the axes takes their width).
LEGEND_CHARS = 24


def check_figure(fig: Any, name: str = "fig") -> None:
    """Refuse anything but a matplotlib Figure (or SubFigure) with a ValidationError naming
    argument ``name`` and the type received.

    Raises
    ------
    ValidationError
    """
    from matplotlib.figure import FigureBase

    if not isinstance(fig, FigureBase):
        raise ValidationError(f"`{name}` must be a matplotlib Figure; got {type(fig).__name__}.")


def caption(fig: Any, text: str, *, fontsize: str | float = "small") -> Any:
    """Write ``text`` under the figure, wrapped to its width in lines of even length, as the
    figure's ``supxlabel`` (constrained layout keeps room for it below every axes).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    text : str
        The setup: cluster, trace, seeds, what the marks mean.
    fontsize : str or float, default "small"

    Returns
    -------
    matplotlib.text.Text
    """
    from matplotlib.font_manager import FontProperties

    check_figure(fig)
    points = FontProperties(size=fontsize).get_size_in_points()
    width = max(int(fig.get_figwidth() * 72 / (points * _CHAR_EM)), 20)
    lines = [w for part in text.split("\n") for w in (_even_lines(part, width) or [""])]
    return fig.supxlabel("\n".join(lines), fontsize=fontsize, color="0.25")


def _even_lines(text: str, width: int) -> list[str]:
    """``text`` wrapped to at most ``width`` characters a line, in as few lines as that
    takes, each of about the same length (no one-word last line)."""
    lines = textwrap.wrap(text, width)
    for even in range(-(-len(text) // max(len(lines), 1)), width):
        candidate = textwrap.wrap(text, even)
        if len(candidate) <= len(lines):
            return candidate
    return lines


def legend_outside(ax: Any, **kwargs: Any) -> Any:
    """The legend of ``ax`` right of it, top-aligned, outside the data area (constrained
    layout shrinks the axes to make room), labels over :data:`LEGEND_CHARS` characters
    wrapped; None when nothing is labelled.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    **kwargs
        Passed to ``ax.legend`` (over the defaults: small font, no frame).

    Returns
    -------
    matplotlib.legend.Legend or None
    """
    from matplotlib.axes import Axes

    if not isinstance(ax, Axes):
        raise ValidationError(f"`ax` must be a matplotlib Axes; got {type(ax).__name__}.")
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    opts = {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "borderaxespad": 0.0, "fontsize": "small",
            "frameon": False, **kwargs}
    return ax.legend(handles, [wrap_label(label, LEGEND_CHARS) for label in labels], **opts)


def figure_legend(fig: Any, axes: Sequence[Any] | None = None, *, first: Sequence[str] = (), **kwargs: Any) -> Any:
    """One legend for the whole figure, right of its panels: the labelled handles of
    ``axes`` (default every axes of ``fig``), each label once (wrapped over
    :data:`LEGEND_CHARS` characters); the axes' own legends are removed. None when nothing
    is labelled.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        Made with ``layout="constrained"`` (the legend takes its room from the panels).
    axes : sequence of Axes, optional
    first : sequence of str, optional
        Labels to list first, in this order (matplotlib lists lines before error bars).
    **kwargs
        Passed to ``fig.legend`` (over the defaults: small font, no frame).

    Returns
    -------
    matplotlib.legend.Legend or None
    """
    check_figure(fig)
    found: dict[str, Any] = {}
    for ax in (fig.axes if axes is None else axes):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            found.setdefault(label, handle)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if not found:
        return None
    found = {**{k: found[k] for k in first if k in found}, **found}
    opts = {"loc": "outside right upper", "fontsize": "small", "frameon": False, **kwargs}
    return fig.legend(list(found.values()), [wrap_label(label, LEGEND_CHARS) for label in found], **opts)


def dodge_step(x: Any, count: int) -> float:
    """The default sideways distance between neighbouring series on a linear axis: 1/4 of
    the smallest gap between the distinct ``x`` values (1 when there is one), shared among
    ``count`` series, so the group at one x stays well clear of the next.

    Parameters
    ----------
    x : array-like of float
        Every series' x values together.
    count : int
        Number of series.

    Returns
    -------
    float
    """
    distinct = np.unique(np.asarray(x, dtype=float))
    distinct = distinct[np.isfinite(distinct)]
    gap = float(np.diff(distinct).min()) if distinct.size > 1 else 1.0
    return 0.25 * gap / max(count, 1)


def dodge(x: Any, index: int, count: int, *, step: float | None = None, log: bool = False) -> np.ndarray:
    """``x`` moved sideways for series ``index`` of ``count``, centred on the true value,
    so that markers and error bars of several series at one x stand side by side.

    Parameters
    ----------
    x : array-like of float
        The series' x values.
    index, count : int
        Which series, of how many.
    step : float, optional
        Distance between neighbouring series: on a linear axis in x units (default
        :func:`dodge_step` of ``x``; pass the step of all series' x together when they
        differ), on a log axis a factor minus one (default 0.04: 4 % apart).
    log : bool, default False
        The axis is logarithmic: offsets multiply.

    Returns
    -------
    numpy.ndarray
    """
    x = np.asarray(x, dtype=float)
    shift = index - (count - 1) / 2
    if log:
        return x * (1.0 + (0.04 if step is None else step)) ** shift
    return x + (dodge_step(x, count) if step is None else step) * shift


def wrap_label(label: str, width: int) -> str:
    """``label`` broken onto lines of at most ``width`` characters where it has spaces,
    underscores or ``+`` (kept at the end of a line), unchanged when it fits.

    Parameters
    ----------
    label : str
    width : int

    Returns
    -------
    str
    """
    if len(label) <= width:
        return label
    spaced = label.replace("_", "_\u200b").replace("+", "+\u200b").replace(" ", " \u200b")
    parts = [p for p in spaced.split("\u200b") if p]
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + len(part) <= width:
            lines[-1] += part
        else:
            lines.append(part)
    return "\n".join(line.strip() for line in lines)


def _plain(x: float) -> str:
    """``0.01``, ``3``, ``2000``; ``1e+06`` beyond five digits either way."""
    return f"{x:g}" if 1e-4 <= abs(x) < 1e5 else f"{x:.0e}"


def plain_log_labels(axis: Any) -> None:
    """Label a log-scaled ``axis`` with plain numbers: every decade, and some of the ticks
    between them only when the view spans under a decade (matplotlib's thresholds), so
    labels stay short enough not to run together.

    Parameters
    ----------
    axis : matplotlib.axis.Axis
        ``ax.xaxis`` or ``ax.yaxis``, already on a log scale.
    """
    from matplotlib.ticker import LogFormatter

    class _PlainLogFormatter(LogFormatter):
        def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
            return _plain(x)

    axis.set_major_formatter(_PlainLogFormatter())
    axis.set_minor_formatter(_PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.4)))
