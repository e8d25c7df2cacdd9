"""The one style of every figure FinBench draws: fonts, lines, grid, and a colour per model
that stays the model's across a report's figures (the order the models come in). Every
figure is drawn under :data:`RC` (``figures.FigureSet.draw``)."""

from __future__ import annotations

import contextlib
from contextvars import ContextVar

from cycler import cycler

# Okabe and Ito's colour-blind-safe palette, then tab10's others: ten models told apart
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
           "#000000", "#8C564B", "#7F7F7F")
RC = {
    "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "xtick.labelsize": 8,
    "ytick.labelsize": 8, "legend.fontsize": 7, "legend.frameon": False,
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
    "axes.grid.axis": "y", "grid.color": "#e5e5e5", "grid.linewidth": 0.6,
    "axes.axisbelow": True, "lines.linewidth": 1.4, "lines.markersize": 4,
    "axes.prop_cycle": cycler(color=list(PALETTE)),
    "figure.dpi": 100, "savefig.bbox": "tight",
}
LONG_LABEL = 10  # characters: tick labels longer than this (or many) are drawn upright


_MODELS: ContextVar[tuple[str, ...]] = ContextVar("figure_models", default=())


def colour(i: int) -> str:
    """The palette's ``i``-th colour."""
    return PALETTE[i % len(PALETTE)]


def colour_of(model: str, i: int) -> str:
    """A model's colour: by its place among the report's models (:func:`models`), the same
    in every figure; else by its place ``i`` in the figure."""
    order = _MODELS.get()
    return colour(order.index(model) if model in order else i)


CASING = 0.6  # points each model's line is wider than the next model's
MOST_CASING = 3.0  # points the first of many models' lines is wider than the last's at most


def line_width(i: int, n: int, base: float = 1.4) -> float:
    """The width of the ``i``-th of ``n`` models' lines: each :data:`CASING` points wider
    than the next (the last ``base``; the first of more than six alike, at most
    :data:`MOST_CASING` wider), so that a model whose line lies on an earlier one's (a base
    rate and a climatology of the same history answer alike) is seen inside it, not lost."""
    return base + min(CASING * (n - 1 - i), MOST_CASING)


@contextlib.contextmanager
def models(names):
    """Figures drawn inside give each of ``names`` (the report's models, in order) its
    colour."""
    token = _MODELS.set(tuple(names))
    try:
        yield
    finally:
        _MODELS.reset(token)


def category_ticks(ax, positions, labels: list[str]) -> None:
    """Tick labels for categories (models), upright when they are many or long (each then
    takes a line's height of the axis, not its length), so that ten models' names never run
    into each other."""
    longest = max((max(len(s) for s in str(label).split("\n")) for label in labels), default=0)
    if len(labels) > 4 or longest > LONG_LABEL:
        ax.set_xticks(positions, labels, rotation=90, ha="center", va="top")
    else:
        ax.set_xticks(positions, labels)
