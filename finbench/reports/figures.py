"""Figures drawn from report tables; each function takes ``ax=None`` and returns the axes."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from finbench.core.outputs import write_atomic  # noqa: E402
from finbench.reports import style  # noqa: E402


def _ax(ax, width: float = 6.0):
    if ax is None:
        _, ax = plt.subplots(figsize=(width, 3.6))
    return ax


def _width(models: int) -> float:
    """A figure's width for ``models`` bars side by side (ten stay readable)."""
    return max(6.0, 1.6 + 0.62 * models)


def _err(est, lo, hi):
    """Error bar lengths below and above each estimate, never negative: a percentile interval
    need not hold its estimate (a collapsed one, every replicate equal, may lie an ULP beside
    it; a skewed one, further), and the bar then stops at the estimate on that side. No
    interval (NaN): no bar."""
    est, lo, hi = (np.asarray(x, float) for x in (est, lo, hi))
    with np.errstate(invalid="ignore"):
        low = np.where(np.isnan(lo) | np.isnan(est), 0.0, np.maximum(est - lo, 0.0))
        high = np.where(np.isnan(hi) | np.isnan(est), 0.0, np.maximum(hi - est, 0.0))
    return np.vstack([low, high])


def plot_skill_by_model(table: pd.DataFrame, *, ax=None, title: str = "",
                        ylabel: str | None = None):
    """Brier skill vs the reference (bss) per model, with bootstrap CIs (Fig. 1). Each bar is
    computed on the rows that model and the reference both scored; its label says how many
    (``bss_n``)."""
    ax = _ax(ax, _width(len(table)))
    x = np.arange(len(table))
    ax.bar(x, table["bss"], yerr=_err(table["bss"], table["bss_lo"], table["bss_hi"]),
           color=[style.colour_of(str(m), i) for i, m in enumerate(table["model"])],
           capsize=3)
    ax.axhline(0, color="black", lw=0.8)
    labels = [f"{m}\nn={int(n)}" if pd.notna(n) else f"{m}\nn=0"
              for m, n in zip(table["model"], table.get("bss_n", [np.nan] * len(table)),
                              strict=True)]
    style.category_ticks(ax, x, labels)
    ref = table["bss_ref"].iloc[0] if len(table) and "bss_ref" in table else "reference"
    ax.set_ylabel(ylabel or f"Brier skill vs {ref}\n(n: rows paired with it)")
    ax.set_title(title)
    return ax


def plot_skill_by_horizon(table: pd.DataFrame):
    """Brier skill vs the reference per model with its bootstrap CI, a panel per horizon
    (the scores by horizon), each bar labelled with its paired N. Returns the first panel
    (``save`` writes the whole figure)."""
    horizons = list(dict.fromkeys(table["slice"]))
    models = len(dict.fromkeys(table["model"]))
    _, axes = plt.subplots(1, max(len(horizons), 1), figsize=(
        max(6.0, len(horizons) * (1.4 + 0.5 * models)), 3.8), sharey=True, squeeze=False)
    for ax, horizon in zip(axes[0], horizons, strict=False):
        plot_skill_by_model(table[table["slice"] == horizon], ax=ax, title=horizon)
        if ax is not axes[0][0]:
            ax.set_ylabel("")
    return axes[0][0]


HEATMAP_TICKER_LABELS = 40  # more tickers than this: their rows unlabelled


def plot_skill_heatmap(cells: pd.DataFrame, *, horizons: list[str] | None = None):
    """A panel per model: its Brier skill against its reference in each ticker (rows) and
    horizon (columns), on a diverging scale centred at 0 (blue: better than the reference),
    symmetric about it; a cell without paired rows or with an undefined skill is grey.
    Returns the first panel (``save`` writes the whole figure)."""
    from matplotlib.colors import TwoSlopeNorm

    models = list(dict.fromkeys(cells["model"]))
    horizons = horizons or list(dict.fromkeys(cells["horizon"]))
    tickers = sorted(dict.fromkeys(cells["ticker"]))
    finite = cells["bss"].to_numpy(float)
    finite = finite[np.isfinite(finite)]
    limit = max(float(np.abs(finite).max()) if len(finite) else 0.0, 0.05)
    columns = min(len(models), 4) or 1
    grid = -(-len(models) // columns) or 1
    height = min(0.16 * len(tickers), 7.0) + 1.4
    fig, axes = plt.subplots(grid, columns, figsize=(2.6 + 2.2 * columns, height * grid),
                             squeeze=False, layout="constrained")
    cmap = plt.get_cmap("RdBu").with_extremes(bad="#d9d9d9")
    image = None
    for ax, model in zip(axes.flat, models, strict=False):
        part = cells[cells["model"] == model]
        values = part.pivot(index="ticker", columns="horizon", values="bss").reindex(
            index=tickers, columns=horizons)
        image = ax.imshow(np.ma.masked_invalid(values.to_numpy(float)), aspect="auto",
                          cmap=cmap, norm=TwoSlopeNorm(0.0, -limit, limit),
                          interpolation="nearest")
        ax.set_title(model)
        ax.set_xticks(np.arange(len(horizons)), horizons,
                      rotation=0 if len(horizons) <= 3 else 90, fontsize=7)
        if len(tickers) <= HEATMAP_TICKER_LABELS:
            ax.set_yticks(np.arange(len(tickers)), tickers)
        else:
            ax.set_yticks([])
            ax.set_ylabel(f"{len(tickers)} tickers (sorted)")
        ax.grid(False)
    for ax in list(axes.flat)[len(models):]:
        ax.set_visible(False)
    if image is not None:
        ref = cells["reference"].iloc[0] if len(cells) else "reference"
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, aspect=30,
                     label=f"Brier skill vs {ref}\n(blue: better)")
    return axes[0][0]


HORIZON_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")  # a horizon's marker, in order


def plot_brier_vs_coverage(table: pd.DataFrame, *, ax=None, nominal: float = 0.8):
    """Brier score against interval coverage, one point per model × horizon (Fig. 2): the
    model its colour, the horizon its marker (the legend names both: a model by a swatch of
    its colour, a horizon by its marker in grey). A model that gives no interval has no
    coverage, and is neither drawn nor named."""
    from matplotlib.lines import Line2D

    ax = _ax(ax)
    horizons = list(dict.fromkeys(table.loc[table["coverage"].notna(), "slice"]))
    marker = {h: HORIZON_MARKERS[j % len(HORIZON_MARKERS)] for j, h in enumerate(horizons)}
    handles = []
    for i, model in enumerate(_with(table, "coverage")):
        part = table[(table["model"] == model) & table["coverage"].notna()]
        colour = style.colour_of(model, i)
        for horizon, point in part.groupby("slice", sort=False):
            ax.scatter(point["coverage"], point["brier"], color=colour, marker=marker[horizon])
        handles.append(Line2D([], [], color=colour, lw=3, label=model))  # (no marker)
    handles += [Line2D([], [], ls="", marker=marker[h], color="grey", label=h)
                for h in (horizons if len(horizons) > 1 else [])]
    ax.axvline(nominal, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("coverage of the 80% interval")
    ax.set_ylabel("Brier score (lower is better)")
    _legend(ax, handles)
    return ax


def plot_across_horizons(table: pd.DataFrame, *, ax=None, metric: str = "brier"):
    """One line per model across horizons (Fig. 3)."""
    ax = _ax(ax)
    horizons = list(dict.fromkeys(table["slice"]))
    n = table["model"].nunique()
    for i, (model, part) in enumerate(table.groupby("model", sort=False)):
        part = part.set_index("slice").reindex(horizons)
        ax.errorbar(np.arange(len(horizons)), part[metric],
                    yerr=_err(part[metric], part[f"{metric}_lo"], part[f"{metric}_hi"])
                    if f"{metric}_lo" in part else None, marker="o", capsize=3, label=model,
                    color=style.colour_of(model, i), lw=style.line_width(i, n))
    ax.set_xticks(np.arange(len(horizons)), horizons)
    ax.set_ylabel(metric)
    _legend(ax)
    return ax


def plot_reliability(bins: pd.DataFrame, *, ax=None, xlabel: str = "mean forecast p_up",
                     ylabel: str | None = "observed frequency of up", legend: bool = True):
    """Observed frequency against mean forecast per bin, a line per model."""
    ax = _ax(ax)
    ax.plot([0, 1], [0, 1], color="grey", ls="--", lw=0.8)
    for i, (model, part) in enumerate(bins.groupby("model", sort=False)):
        used = part[part["count"] > 0]
        ax.plot(used["mean_prob"], used["obs_freq"], marker="o", label=model,
                color=style.colour_of(model, i))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    if legend:
        ax.legend(fontsize=7)
    return ax


def plot_reliability_sharpness(bins: pd.DataFrame, *, xlabel: str = "forecast p_up",
                               event: str = "up", title: str = ""):
    """Reliability above, sharpness below: per model, the observed frequency of ``event``
    against the mean forecast of each bin, each point's area growing with its bin's count
    (the count written beside it where it fits, :func:`_count_labels`), the legend giving the
    model's n; below, its sharpness: the share of its forecasts in each bin, a stem at the
    bin's mean forecast (bins of equal mass span wide ranges: a constant forecaster's one bin
    is a stem at its constant). Each model's line is narrower than the one before
    (:func:`~finbench.reports.style.line_width`), so that models whose bins coincide each
    show. ``title``: above both panels (none when empty), set before the counts are laid
    out, so that neither covers the other.
    Returns the upper panel (``save`` writes the whole figure)."""
    fig, (top, low) = plt.subplots(2, 1, figsize=(6.4, 5.6), sharex=True,
                                   gridspec_kw={"height_ratios": [3, 1.3]})
    top.plot([0, 1], [0, 1], color="grey", ls="--", lw=0.8)
    models = list(dict.fromkeys(bins["model"]))
    counts = []  # (count, model's place, x, y, colour) of every point
    for i, model in enumerate(models):
        part = bins[bins["model"] == model]
        used = part[part["count"] > 0]
        n = int(part["count"].sum())
        c = style.colour_of(model, i)
        top.plot(used["mean_prob"], used["obs_freq"], color=c,
                 lw=style.line_width(i, len(models), 1.0), label=f"{model} (n={n})")
        top.scatter(used["mean_prob"], used["obs_freq"], color=c, alpha=0.85,
                    s=10 + 90 * used["count"] / max(int(bins["count"].max()), 1))
        counts += [(int(k), i, x, y, c) for x, y, k in zip(
            used["mean_prob"], used["obs_freq"], used["count"], strict=True)]
        share = used["count"].to_numpy(float) / max(n, 1)
        low.vlines(used["mean_prob"], 0, share, color=c, lw=2.0, alpha=0.85)
        low.plot(used["mean_prob"], share, "o", color=c, markersize=3)
    top.set_xlim(0, 1)
    top.set_ylim(-0.02, 1.02)
    top.set_ylabel(f"observed frequency of {event}")
    low.set_xlabel(xlabel)
    low.set_ylabel("share of\nforecasts")
    low.set_ylim(0, 1.05)
    if models:
        _legend(top)
    if title:
        fig.suptitle(title, fontsize=9)
    _count_labels(top, counts)
    return top


LABEL_GAP = 2.0  # pixels kept between two count labels


def _count_labels(ax, counts: list[tuple]) -> None:
    """Write each point's count beside it, ``counts`` being (count, model's place, x, y,
    colour): the smallest counts first (the points a reader most needs to weigh), and a
    count only where its text would overlap none written before (where several models'
    bins coincide, their larger counts are left to the points' areas and the sharpness
    panel). Laid out as the saved figure is (tight), so the texts are measured where they
    will be drawn."""
    fig = ax.figure
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    placed = []
    for k, _, x, y, c in sorted(counts, key=lambda t: (t[0], t[1], t[2])):
        text = ax.annotate(str(k), (x, y), xytext=(3, 3), textcoords="offset points",
                           fontsize=6, color=c)
        box = text.get_window_extent(renderer).padded(LABEL_GAP / 2)
        if any(box.overlaps(other) for other in placed):
            text.remove()
        else:
            placed.append(box)


def murphy_curves(rows: pd.DataFrame, models, *, p: str = "p_up") -> pd.DataFrame:
    """Each model's Murphy diagram on its scored rows (``rows``: ``model``, ``scored``,
    ``y`` and the probability column ``p``), long: model, threshold, mean elementary score
    (:func:`finbench.scoring.murphy.elementary_scores`)."""
    from finbench.scoring.murphy import THRESHOLDS, elementary_scores

    out = []
    # each model's scored rows by position: no frame of them (its every column copied)
    scored = rows["scored"].to_numpy(bool)
    probs, outcomes = rows[p].to_numpy(float), rows["y"].astype(float).to_numpy()
    for model in models:
        own = np.flatnonzero((rows["model"] == model).to_numpy(bool) & scored)
        if not len(own):
            continue
        out.append(pd.DataFrame({"model": model, "threshold": THRESHOLDS,
                                 "score": elementary_scores(probs[own], outcomes[own])}))
    return (pd.concat(out, ignore_index=True) if out
            else pd.DataFrame(columns=["model", "threshold", "score"]))


def plot_murphy(curves: pd.DataFrame, *, event: str = "up"):
    """Murphy diagram: each model's mean elementary score against the threshold (a decision
    maker's cost ratio), lower is better; twice the area under a curve is the model's
    Brier score (the legend gives it)."""
    ax = _ax(None)
    n = curves["model"].nunique()
    for i, (model, part) in enumerate(curves.groupby("model", sort=False)):
        area = 2 * float(np.trapezoid(np.r_[0.0, part["score"], 0.0],
                                      np.r_[0.0, part["threshold"], 1.0]))
        ax.plot(part["threshold"], part["score"], color=style.colour_of(model, i),
                lw=style.line_width(i, n, 1.3), label=f"{model} (2 x area {area:.3f})")
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(f"threshold theta (act on '{event}' when p > theta)")
    ax.set_ylabel("mean elementary score")
    _legend(ax)
    return ax


def plot_corp_reliability(points: pd.DataFrame, summary: pd.DataFrame, *,
                          xlabel: str = "forecast p_up", event: str = "up"):
    """CORP reliability diagrams, a panel per model: the recalibrated probability (isotonic
    regression of the outcomes on the forecasts) as a step function of the forecast, over
    its consistency band (shaded, where drawn) around the diagonal, with the forecasts'
    histogram along the bottom and the panel titled with the model's n and its Brier
    score's MCB, DSC and UNC. Returns the first panel (``save`` writes the figure)."""
    models = list(dict.fromkeys(points["model"]))
    cols = min(3, len(models))
    rows = -(-len(models) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.1 * cols, 3.0 * rows), squeeze=False,
                             sharex=True, sharey=True, layout="constrained")  # (a suptitle
    terms = summary.set_index("model")  # added after is laid out too)
    for i, model in enumerate(models):
        ax = axes[i // cols][i % cols]
        part = points[points["model"] == model].sort_values("x")
        c = style.colour_of(model, i)
        ax.plot([0, 1], [0, 1], color="grey", ls="--", lw=0.8)
        if part["lower"].notna().all() and len(part) > 1:
            ax.fill_between(part["x"], part["lower"], part["upper"], step="post",
                            color="grey", alpha=0.25, lw=0)
        elif part["lower"].notna().all():
            ax.vlines(part["x"], part["lower"], part["upper"], color="grey", alpha=0.5, lw=3)
        ax.step(part["x"], part["cep"], where="post", color=c, lw=1.4)
        ax.plot(part["x"], part["cep"], "o", color=c, markersize=2.5)
        share = part["count"].to_numpy(float) / max(float(part["count"].sum()), 1.0)
        ax.vlines(part["x"], 0, 0.15 * share / max(share.max(), 1e-12), color=c, lw=1.0,
                  alpha=0.6)
        t = terms.loc[model]
        ax.set_title(f"{model} (n={int(t['n'])})\nMCB {t['mcb']:.3f}  DSC {t['dsc']:.3f}  "
                     f"UNC {t['unc']:.3f}", fontsize=7)
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.02, 1.02)
        if i % cols == 0:
            ax.set_ylabel(f"recalibrated P({event})")
        if i + cols >= len(models):  # the lowest panel of its column: its axis labelled
            ax.set_xlabel(xlabel)
            ax.xaxis.set_tick_params(labelbottom=True)
    for j in range(len(models), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    return axes[0][0]


def plot_class_reliability(bins: pd.DataFrame):
    """One-vs-rest reliability of three-class forecasts: a panel per class (down, flat, up),
    observed frequency of the class against its mean forecast probability per bin. Returns
    the first panel (``save`` writes the whole figure)."""
    _, axes = plt.subplots(1, 3, figsize=(11, 3.6), sharey=True)
    for k, (ax, (name, part)) in enumerate(zip(axes, bins.groupby("cls", sort=False),
                                               strict=False)):
        plot_reliability(part, ax=ax, xlabel=f"mean forecast q_{name}",
                         ylabel="observed frequency of the class" if k == 0 else None,
                         legend=k == 0)
        ax.set_title(name)
    return axes[0]


def _with(table: pd.DataFrame, column: str) -> list[str]:
    """The models of ``table`` with a number in ``column`` (those giving no interval have
    none: they are not drawn, nor named in the legend), in the table's order."""
    has = table[column].notna().to_numpy(bool)
    return list(dict.fromkeys(table["model"].to_numpy(object)[has]))


def _legend(ax, handles: list | None = None) -> None:
    """The legend of what is drawn (or of ``handles``), outside the plotting area (never over
    a bar or a line); none when nothing is."""
    handles = ax.get_legend_handles_labels()[0] if handles is None else handles
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0)


def plot_coverage_by_horizon(table: pd.DataFrame, *, ax=None, nominal: float = 0.8):
    """Coverage of the 80% interval per horizon and model (the models that give one)."""
    ax = _ax(ax)
    horizons = list(dict.fromkeys(table["slice"]))
    models = _with(table, "coverage")
    width = 0.8 / max(len(models), 1)
    for j, model in enumerate(models):
        part = table[table["model"] == model].set_index("slice").reindex(horizons)
        ax.bar(np.arange(len(horizons)) + j * width, part["coverage"], width, label=model,
               color=style.colour_of(model, j))
    ax.axhline(nominal, color="black", ls="--", lw=0.8, label=f"nominal {nominal:.0%}")
    ax.set_xticks(np.arange(len(horizons)) + 0.4 - width / 2, horizons)
    ax.set_ylabel("coverage")
    _legend(ax)
    return ax


def plot_width_by_horizon(table: pd.DataFrame, *, ax=None):
    """Mean interval width (log-return units) per horizon and model (those that give one)."""
    ax = _ax(ax)
    horizons = list(dict.fromkeys(table["slice"]))
    shown = _with(table, "width")
    for j, model in enumerate(shown):
        part = table[table["model"] == model].set_index("slice").reindex(horizons)
        ax.plot(np.arange(len(horizons)), part["width"], marker="o", label=model,
                color=style.colour_of(model, j), lw=style.line_width(j, len(shown)))
    ax.set_xticks(np.arange(len(horizons)), horizons)
    ax.set_ylabel("mean width of the 80% interval")
    _legend(ax)
    return ax


WEALTH_BUCKETS = 2000  # a long wealth line is drawn from each bucket's low and high


def wealth_points(path: np.ndarray) -> np.ndarray:
    """Positions of a path's points to draw. A path of up to two points per bucket is drawn
    whole. A longer one (1,258 sessions of five years, or more) is cut into
    ``WEALTH_BUCKETS`` runs of consecutive points, and each run's lowest and highest point is
    drawn, with the first and the last: the line keeps every peak and trough the figure's 900
    pixels can show, in at most 4,002 points."""
    y = np.asarray(path, float)
    n = len(y)
    if n <= 2 * WEALTH_BUCKETS:
        return np.arange(n)
    size = -(-n // WEALTH_BUCKETS)
    blocks = np.r_[y, np.full(size * WEALTH_BUCKETS - n, y[-1])].reshape(WEALTH_BUCKETS, size)
    first = np.arange(WEALTH_BUCKETS) * size
    keep = np.r_[0, first + blocks.argmin(axis=1), first + blocks.argmax(axis=1), n - 1]
    return np.unique(np.minimum(keep, n - 1))


def plot_wealth(paths: dict[str, tuple[np.ndarray, np.ndarray]], *, ax=None):
    """Log wealth of a Kelly bettor at even odds, per model, by session date: 0 (wealth 1) the
    day before the first session, then after each session (marked when there are few); a
    ruined bettor's line ends at its last session before ruin, marked with an x. The axis
    ticks dates (never hours); a line breaks across a gap of sessions (:data:`GAP_DAYS`)."""
    ax = _ax(ax)
    first = last = None  # the sessions drawn, for the axis's ticks
    for i, (model, (dates, path)) in enumerate(paths.items()):
        if not len(dates):
            continue
        finite = np.isfinite(path)
        end = int(np.argmin(finite)) if not finite.all() else len(path)
        start = np.asarray(dates[:1], "datetime64[ns]") - np.timedelta64(1, "D")
        x = np.r_[start, np.asarray(dates[:end], "datetime64[ns]")]
        y = np.r_[0.0, np.asarray(path[:end], float)]
        keep = wealth_points(y)
        gx, gy = _broken_at_gaps(x[keep], y[keep])
        line, = ax.plot(gx, gy, label=model, marker="o" if len(y) <= 60 else None,
                        color=style.colour_of(model, i), markersize=3,
                        lw=style.line_width(i, len(paths)))
        if end < len(path):
            ax.plot([dates[end]], [y[-1]], marker="x", color=line.get_color())
        first = x[0] if first is None else min(first, x[0])
        last = x[-1] if last is None else max(last, x[-1])
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("session")
    ax.set_ylabel("log wealth")
    if first is not None:
        _session_axis(ax, first, last)
    ax.figure.autofmt_xdate()
    _legend(ax)  # (no model with a bet: no legend)
    return ax


GAP_DAYS = 7  # sessions further apart (a run over months apart) are not joined by a line


def _broken_at_gaps(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points with a gap (NaN, where a line breaks) between two sessions more than
    :data:`GAP_DAYS` apart: a line never crosses months without data."""
    cut = np.flatnonzero(np.diff(x) > np.timedelta64(GAP_DAYS, "D")) + 1
    return (np.insert(x, cut, x[cut - 1] + np.timedelta64(1, "D")) if len(cut) else x,
            np.insert(y, cut, np.nan) if len(cut) else y)


def _session_axis(ax, first, last) -> None:
    """Date ticks on a session axis: days (never hours) over a month or less, else the
    months and years a date locator picks."""
    import matplotlib.dates as mdates

    days = (np.datetime64(last, "ns") - np.datetime64(first, "ns")) / np.timedelta64(1, "D")
    if days <= 31:
        ax.xaxis.set_major_locator(mdates.DayLocator(interval=max(1, int(np.ceil(days / 8)))))
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d"))
    else:
        locator = mdates.AutoDateLocator(minticks=3, maxticks=8)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


class FiguresFailed(RuntimeError):
    """Some figures could not be drawn (each named with its error); every other figure, table
    and page was written."""

    def __init__(self, failures: dict[str, BaseException]) -> None:
        self.failures = failures
        super().__init__("; ".join(f"figure {name} was not drawn: {type(exc).__name__}: {exc}"
                                   for name, exc in failures.items()))


class FigureSet:
    """Figures drawn one at a time into ``folder``: one that fails is recorded with its error
    and never stops the others (``paths``: the files written; ``failures``: by name)."""

    def __init__(self, folder, models=()) -> None:
        """``models``: the report's models in order, each given its colour in every figure
        (:func:`~finbench.reports.style.models`)."""
        self.folder, self.paths, self.failures = folder, [], {}
        self.models = tuple(models)

    def draw(self, name: str, plot, *args, **kwargs) -> None:
        """``plot(*args, **kwargs)`` returns the axes to save as ``name``."""
        with plt.rc_context(style.RC), style.models(self.models):  # the one style
            try:
                ax = plot(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 -- a figure's bug is named, the rest drawn
                plt.close("all")
                self.failures[name] = exc
                return
            self.paths += save(ax, self.folder, name)

    def check(self) -> None:
        """Raise :class:`FiguresFailed` naming every figure that failed."""
        if self.failures:
            raise FiguresFailed(self.failures)


def save(ax, folder, name: str) -> list:
    """Write ``name.png`` and ``name.pdf`` (no timestamps in the files) and close the figure."""
    folder.mkdir(parents=True, exist_ok=True)
    fig = ax.figure
    if fig.get_layout_engine() is None:  # (a figure laid out as it is drawn: left as it is)
        fig.tight_layout()
    paths = [folder / f"{name}.png", folder / f"{name}.pdf"]
    write_atomic(paths[0], lambda p: fig.savefig(p, format="png", dpi=150,
                                                 metadata={"Software": None}))
    write_atomic(paths[1], lambda p: fig.savefig(p, format="pdf", metadata={
        "CreationDate": None, "Producer": None, "Creator": None}))
    plt.close(fig)
    return paths
