"""Figures drawn from report tables; each function takes ``ax=None`` and returns the axes."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from finbench.core.outputs import write_atomic  # noqa: E402


def _ax(ax):
    if ax is None:
        _, ax = plt.subplots(figsize=(6.0, 3.6))
    return ax


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


def plot_skill_by_model(table: pd.DataFrame, *, ax=None, title: str = ""):
    """Brier skill vs the reference (bss) per model, with bootstrap CIs (Fig. 1). Each bar is
    computed on the rows that model and the reference both scored; its label says how many
    (``bss_n``)."""
    ax = _ax(ax)
    x = np.arange(len(table))
    ax.bar(x, table["bss"], yerr=_err(table["bss"], table["bss_lo"], table["bss_hi"]),
           color="#4C72B0", capsize=3)
    ax.axhline(0, color="black", lw=0.8)
    labels = [f"{m}\nn={int(n)}" if pd.notna(n) else f"{m}\nn=0"
              for m, n in zip(table["model"], table.get("bss_n", [np.nan] * len(table)),
                              strict=True)]
    ax.set_xticks(x, labels, rotation=20, ha="right")
    ref = table["bss_ref"].iloc[0] if len(table) and "bss_ref" in table else "reference"
    ax.set_ylabel(f"Brier skill vs {ref}\n(n: rows paired with it)")
    ax.set_title(title)
    return ax


def plot_brier_vs_coverage(table: pd.DataFrame, *, ax=None, nominal: float = 0.8):
    """Brier score against interval coverage, one point per model × horizon (Fig. 2)."""
    ax = _ax(ax)
    for model, part in table.groupby("model", sort=False):
        ax.scatter(part["coverage"], part["brier"], label=model)
    ax.axvline(nominal, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("coverage of the 80% interval")
    ax.set_ylabel("Brier score (lower is better)")
    ax.legend(fontsize=7)
    return ax


def plot_across_horizons(table: pd.DataFrame, *, ax=None, metric: str = "brier"):
    """One line per model across horizons (Fig. 3)."""
    ax = _ax(ax)
    horizons = list(dict.fromkeys(table["slice"]))
    for model, part in table.groupby("model", sort=False):
        part = part.set_index("slice").reindex(horizons)
        ax.errorbar(np.arange(len(horizons)), part[metric],
                    yerr=_err(part[metric], part[f"{metric}_lo"], part[f"{metric}_hi"])
                    if f"{metric}_lo" in part else None, marker="o", capsize=3, label=model)
    ax.set_xticks(np.arange(len(horizons)), horizons)
    ax.set_ylabel(metric)
    ax.legend(fontsize=7)
    return ax


def plot_reliability(bins: pd.DataFrame, *, ax=None, xlabel: str = "mean forecast p_up",
                     ylabel: str | None = "observed frequency of up", legend: bool = True):
    """Observed frequency against mean forecast per bin, a line per model."""
    ax = _ax(ax)
    ax.plot([0, 1], [0, 1], color="grey", ls="--", lw=0.8)
    for model, part in bins.groupby("model", sort=False):
        used = part[part["count"] > 0]
        ax.plot(used["mean_prob"], used["obs_freq"], marker="o", label=model)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    if legend:
        ax.legend(fontsize=7)
    return ax


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


def _legend(ax) -> None:
    """The legend of what is drawn, outside the plotting area (never over a bar or a line);
    none when nothing is."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def plot_coverage_by_horizon(table: pd.DataFrame, *, ax=None, nominal: float = 0.8):
    """Coverage of the 80% interval per horizon and model (the models that give one)."""
    ax = _ax(ax)
    horizons = list(dict.fromkeys(table["slice"]))
    models = _with(table, "coverage")
    width = 0.8 / max(len(models), 1)
    for j, model in enumerate(models):
        part = table[table["model"] == model].set_index("slice").reindex(horizons)
        ax.bar(np.arange(len(horizons)) + j * width, part["coverage"], width, label=model)
    ax.axhline(nominal, color="black", ls="--", lw=0.8)
    ax.set_xticks(np.arange(len(horizons)) + 0.4 - width / 2, horizons)
    ax.set_ylabel("coverage")
    _legend(ax)
    return ax


def plot_width_by_horizon(table: pd.DataFrame, *, ax=None):
    """Mean interval width (log-return units) per horizon and model (those that give one)."""
    ax = _ax(ax)
    horizons = list(dict.fromkeys(table["slice"]))
    for model in _with(table, "width"):
        part = table[table["model"] == model].set_index("slice").reindex(horizons)
        ax.plot(np.arange(len(horizons)), part["width"], marker="o", label=model)
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
    for model, (dates, path) in paths.items():
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
                        markersize=3)
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
    if ax.get_legend_handles_labels()[0]:  # (no model with a bet: no legend)
        ax.legend(fontsize=7)
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

    def __init__(self, folder) -> None:
        self.folder, self.paths, self.failures = folder, [], {}

    def draw(self, name: str, plot, *args, **kwargs) -> None:
        """``plot(*args, **kwargs)`` returns the axes to save as ``name``."""
        try:
            ax = plot(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 -- a figure's bug is named, the rest is drawn
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
    fig.tight_layout()
    paths = [folder / f"{name}.png", folder / f"{name}.pdf"]
    write_atomic(paths[0], lambda p: fig.savefig(p, format="png", dpi=150,
                                                 metadata={"Software": None}))
    write_atomic(paths[1], lambda p: fig.savefig(p, format="pdf", metadata={
        "CreationDate": None, "Producer": None, "Creator": None}))
    plt.close(fig)
    return paths
