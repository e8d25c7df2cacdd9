"""Figures of an event run, drawn from its stored ``rows`` and ``skill`` only: how reliable
each model's probabilities of YES are (equal-mass bins, as rare events crowd near 0), and
its Brier skill against each reference with the event-group bootstrap interval."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from finbench.reports import figures as F
from finbench.scoring.calibration import bin_index

RELIABILITY_BINS = 10  # equal-mass bins per model (fewer where its forecasts tie)


def event_reliability(rows: pd.DataFrame) -> pd.DataFrame:
    """Per model, on its scored rows (valid answers on scored markets): equal-mass bins of
    ``p_yes`` with their edges, count, YES count, mean forecast and observed frequency of YES.
    Each model is binned on its own forecasts; ``n`` is its number of scored rows."""
    out = []
    for model, part in rows[rows["scored"]].groupby("model", sort=False):
        p, y = part["p_yes"].to_numpy(float), part["y"].to_numpy(np.int64)
        idx, edges = bin_index(p, bins=RELIABILITY_BINS, strategy="quantile")
        k = len(edges) - 1
        count = np.bincount(idx, minlength=k)
        yes = np.bincount(idx, weights=y, minlength=k).astype(np.int64)
        used = count > 0
        out.append(pd.DataFrame({
            "model": model, "n": len(p), "bin": np.arange(k)[used], "lower": edges[:-1][used],
            "upper": edges[1:][used], "count": count[used], "yes": yes[used],
            "mean_prob": np.bincount(idx, weights=p, minlength=k)[used] / count[used],
            "obs_freq": yes[used] / count[used]}))
    columns = ["model", "n", "bin", "lower", "upper", "count", "yes", "mean_prob", "obs_freq"]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=columns)


def plot_event_reliability(bins: pd.DataFrame, *, title: str = ""):
    """Observed frequency of YES against mean forecast per equal-mass bin, a line per model,
    each point's area growing with its bin's count; below, the share of each model's
    forecasts in each bin (:func:`~finbench.reports.figures.plot_reliability_sharpness`),
    ``title`` above both."""
    return F.plot_reliability_sharpness(bins, xlabel="forecast p_yes (equal-mass bins)",
                                        event="YES", title=title)


def plot_event_skill(skill: pd.DataFrame):
    """A panel per reference: each other model's Brier skill against it on all markets, with
    the bootstrap interval and the n both answered; an undefined skill is said under its
    model, with no bar. Returns the first panel (``save`` writes the whole figure)."""
    refs = list(dict.fromkeys(skill["reference"]))
    _, axes = F.plt.subplots(1, len(refs), figsize=(4.0 * len(refs), 3.6), squeeze=False)
    for ax, ref in zip(axes[0], refs, strict=True):
        part = skill[skill["reference"] == ref]
        table = pd.DataFrame({
            "model": [f"{m}\n(undefined)" if u else m
                      for m, u in zip(part["model"], part["bss_undefined"], strict=True)],
            "bss": part["bss"].to_numpy(float), "bss_lo": part["bss_lo"].to_numpy(float),
            "bss_hi": part["bss_hi"].to_numpy(float), "bss_n": part["n"].to_numpy(),
            "bss_ref": ref})
        F.plot_skill_by_model(table, ax=ax)
    return axes[0][0]


def event_figures(run_dir: Path, bins: pd.DataFrame, *, synthetic: bool = False,
                  corp: tuple[pd.DataFrame, pd.DataFrame] | None = None,
                  murphy: pd.DataFrame | None = None) -> F.FigureSet:
    """The event run's figures into ``RUN/figures``: reliability (from ``bins``, the
    table :func:`event_reliability` made), the CORP diagrams (``corp``: their points and
    decomposition, :func:`event_corp`), the Murphy diagram (``murphy``: its curves,
    :func:`~finbench.reports.figures.murphy_curves`) and, when the run has references, skill, each
    titled SYNTHETIC on synthetic data; one that fails is recorded in the returned set and
    the others are drawn."""
    figs = F.FigureSet(run_dir / "figures", models=list(dict.fromkeys(bins["model"])))
    title = "SYNTHETIC data" if synthetic else ""
    if len(bins):
        figs.draw("event_reliability", plot_event_reliability, bins, title=title)
    if murphy is not None and len(murphy):
        figs.draw("event_murphy", _titled(F.plot_murphy, title), murphy, event="YES")
    if corp is not None and len(corp[0]):
        figs.draw("event_reliability_corp", _titled(F.plot_corp_reliability, title), *corp,
                  xlabel="forecast p_yes", event="YES")
    skill = pd.read_parquet(run_dir / "skill.parquet")
    overall = skill[skill["slice_kind"] == "overall"]
    if len(overall):
        figs.draw("event_skill", _titled(plot_event_skill, title), overall)
    return figs


def event_corp(rows: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the CORP diagram's points per model, long; per model the CORP decomposition of its
    Brier score on its scored rows), :mod:`finbench.scoring.corp`, bands seeded by
    ``seed``."""
    from finbench.scoring.corp import BAND_LEVEL, reliability

    points, summary = [], []
    for model, part in rows[rows["scored"]].groupby("model", sort=False):
        p, y = part["p_yes"].to_numpy(float), part["y"].to_numpy(float)
        parts, drawn = reliability(p, y, seed=seed)
        summary.append({"model": model, **parts, "groups": int(part["event_group"].nunique()),
                        "bands": f"{BAND_LEVEL:.0%}" if drawn["lower"] is not None else "none"})
        none = np.full(len(drawn["x"]), np.nan)
        points.append(pd.DataFrame({
            "model": model, "x": drawn["x"], "cep": drawn["cep"], "count": drawn["count"],
            "lower": none if drawn["lower"] is None else drawn["lower"],
            "upper": none if drawn["upper"] is None else drawn["upper"]}))
    columns = ["model", "n", "groups", "distinct", "brier", "mcb", "dsc", "unc", "bands"]
    return (pd.concat(points, ignore_index=True) if points else pd.DataFrame(
        columns=["model", "x", "cep", "count", "lower", "upper"]),
        pd.DataFrame(summary, columns=columns))


def _titled(plot, title: str):
    """``plot`` whose figure gets ``title`` above it (none when empty), for figures laid out
    when saved (a figure laid out while drawn takes its title itself)."""
    def draw(*args, **kwargs):
        ax = plot(*args, **kwargs)
        if title:
            ax.figure.suptitle(title, fontsize=9)
        return ax
    return draw
