"""Naive reference implementations (a Python loop per task with pandas filters).

Written straight from docs/spec.md §4-5 without sharing code with the intraday track's ``labels`` and
``gate``, so the vectorised versions are checked against an independent answer.
"""

from __future__ import annotations

import math
import warnings

import exchange_calendars as xcals
import numpy as np
import pandas as pd


def library_calendar(name: str, start: str, end: str):
    """exchange-calendars' own calendar (not FinBench's kept sessions). exchange-calendars
    4.13 reads ``Series.values`` internally, which pandas 3 flags; its values are UTC."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Series.values returning an ndarray")
        return xcals.get_calendar(name, start=start, end=end)


def naive_labels(tasks: pd.DataFrame, bars: pd.DataFrame, *, bar_seconds=60, window_seconds=30):
    rows = []
    delta = pd.Timedelta(seconds=bar_seconds)
    w = pd.Timedelta(seconds=window_seconds)
    for task in tasks.itertuples():
        own = bars[bars["ticker"] == task.ticker]
        avail = own["ts"] + delta

        def price(t, own=own, avail=avail):
            hit = own[(avail >= t - w) & (avail <= t)]
            if hit.empty:
                return None
            last = hit.iloc[-1]
            return (last["high"] + last["low"]) / 2

        p_ref, p_tgt = price(task.t_forecast), price(task.t_target)
        regular = own[(own["ts"] >= task.session_open) & (own["ts"] < task.session_close)]
        if regular.empty:  # no bar in the session's regular hours
            rows.append((task.task_id, "no_bars", p_ref, p_tgt, None, None))
        elif p_ref is None:
            rows.append((task.task_id, "no_reference_price", None, p_tgt, None, None))
        elif p_tgt is None:
            rows.append((task.task_id, "no_target_price", p_ref, None, None, None))
        else:
            r = math.log(p_tgt / p_ref)
            rows.append((task.task_id, "ok", p_ref, p_tgt, r, 1 if r > 0 else 0))
    return pd.DataFrame(rows, columns=["task_id", "status", "p_ref", "p_target", "r", "y"])


def naive_context(task, bars, headlines, daily, *, bar_seconds=60, previous=5, hours=24.0, k=20,
                  timezone="America/New_York"):
    """Item identities of one task's context and its max input time."""
    delta = pd.Timedelta(seconds=bar_seconds)
    t = task.t_forecast
    own = bars[bars["ticker"] == task.ticker]
    if "local_date" in own:  # precomputed by a caller looping over many tasks
        local_date = own["local_date"]
    else:
        local_date = own["ts"].dt.tz_convert(timezone).dt.strftime("%Y-%m-%d")
    so_far = own[(local_date == task.session) & (own["ts"] + delta <= t)]
    days = daily[(daily["ticker"] == task.ticker) & (daily["session"] < task.session)]
    days = days.tail(previous) if previous else days.iloc[0:0]
    mine = headlines[headlines["tickers"].map(lambda ts: task.ticker in list(ts)).astype(bool)]
    span = pd.Timedelta(hours=hours)
    news = mine[(mine["available_at"] <= t) & (mine["available_at"] > t - span)]
    news = news.sort_values(["available_at", "id"]).tail(k).iloc[::-1] if k else news.iloc[0:0]
    times = list(so_far["ts"] + delta) + list(news["available_at"]) + list(
        pd.to_datetime(days["available_ns"], utc=True))
    return {
        "bars": list(so_far["ts"]),
        "sessions": list(days["session"]),
        "headlines": list(news["id"]),
        "max_input_time": max(times) if times else None,
    }


def naive_daily(bars, calendar, *, timezone="America/New_York", bar_seconds=60):
    """Regular-session OHLCV per ticker and session, by a loop over sessions."""
    rows = []
    local = bars["ts"].dt.tz_convert(timezone).dt.strftime("%Y-%m-%d")
    for day in sorted(local.unique()):
        if not calendar.is_session(day):
            continue
        open_, close = calendar.session_open(day), calendar.session_close(day)
        for ticker in sorted(bars["ticker"].unique()):
            part = bars[(bars["ticker"] == ticker) & (bars["ts"] >= open_) & (bars["ts"] < close)]
            if part.empty:
                continue
            rows.append({
                "ticker": ticker, "session": day, "open": part["open"].iloc[0],
                "high": part["high"].max(), "low": part["low"].min(),
                "close": part["close"].iloc[-1], "volume": part["volume"].sum(),
                "available_ns": (part["ts"].iloc[-1] + pd.Timedelta(seconds=bar_seconds)).value,
            })
    return pd.DataFrame(rows)


def naive_baseline_stats(task, history: pd.DataFrame, *, window: int, sign_column: str | None):
    """For one task, from docs/spec.md §7 read literally: the last ``window`` resolved labels of the
    same ticker and horizon known strictly before ``t_forecast`` (ties in time in table order):
    their count, ups, latest time, the 10%/90% quantiles of their returns, and (with a sign
    column) how many share the task's sign and how many of those went up."""
    same = history[(history["ticker"] == task.ticker) & (history["horizon"] == task.horizon)
                   & (history["status"] == "ok")
                   & (history["label_known_at"] < task.t_forecast)]
    same = same.sort_values("label_known_at", kind="stable").tail(window)
    out = {"count": len(same), "ups": int((same["y"] == 1).sum()),
           "last": same["label_known_at"].max() if len(same) else None,
           "q_lo": same["r"].quantile(0.1) if len(same) else math.nan,
           "q_hi": same["r"].quantile(0.9) if len(same) else math.nan}
    if sign_column is not None:
        own = getattr(task, sign_column)
        match = same[same[sign_column] == own] if not math.isnan(own) else same.iloc[:0]
        out["sign_count"], out["sign_up"] = len(match), int((match["y"] == 1).sum())
    return out


def naive_window_span(task, history: pd.DataFrame, sessions: list[str], *, window: int) -> dict:
    """For one task: the sessions of the oldest and newest of its last ``window`` resolved
    labels, and over the sessions from the oldest to the task's own (excluded), the labels of
    its series that are unscorable, not yet known at ``t_forecast``, or missing because the
    series was not asked that session (early close)."""
    same = history[(history["ticker"] == task.ticker) & (history["horizon"] == task.horizon)]
    used = same[(same["status"] == "ok") & (same["label_known_at"] < task.t_forecast)]
    used = used.sort_values("label_known_at", kind="stable").tail(window)
    if used.empty:
        return {"first": None, "last": None, "unscorable": 0, "early_close": 0, "not_known": 0}
    first = used["session"].iloc[0]
    span = same[(same["session"] >= first) & (same["session"] < task.session)]
    asked = set(span["session"])
    return {"first": first, "last": used["session"].iloc[-1],
            "unscorable": int((span["status"] != "ok").sum()),
            "early_close": sum(1 for d in sessions if first <= d < task.session
                               and d not in asked),
            "not_known": int(((span["status"] == "ok")
                              & (span["label_known_at"] >= task.t_forecast)).sum())}


def naive_score_table(data, *, slice_kind: str, mean_ci, skill_ci) -> pd.DataFrame:
    """Report scores per (slice, model) by pandas filters per cell and a merge with the coin
    on text keys, clusters as texts; ``mean_ci``/``skill_ci`` are the bootstrap functions
    (the table's cells, not the bootstrap, are what this checks)."""
    rep = data.config.report
    coin = next((b for b in data.baselines if b == "coin"), None) or (
        data.baselines[0] if data.baselines else None)
    rows = data.rows
    slices = [("all", rows)] if slice_kind == "overall" else list(
        rows.groupby(slice_kind, sort=False, observed=True))
    if slice_kind == "horizon":
        order = {h: i for i, h in enumerate(data.config.tasks.horizons)}
        slices.sort(key=lambda kv: order.get(kv[0], 99))
    boot = {"replicates": rep.bootstrap_replicates, "seed": rep.seed, "level": rep.level}
    out = []
    for value, part in slices:
        for model in data.models:
            asked = part[part["model"] == model]
            own = asked[asked["scored"]]
            inside = asked[asked["interval_scored"]]
            n = len(own)
            bs = mean_ci(own["brier"], _naive_clusters(own, rep.cluster), **boot)
            wk = mean_ci(inside["winkler"], _naive_clusters(inside, rep.cluster), **boot)
            rec = {"slice": value, "model": model, "n": n,
                   "sessions": int(own["session"].nunique()),
                   "positives": int(own["y"].sum()) if n else 0,
                   "ties": int((own["r"] == 0).sum()),
                   "accuracy": own["correct"].mean() if n else math.nan,
                   "brier": bs.estimate, "brier_lo": bs.lower, "brier_hi": bs.upper,
                   "log_loss": own["log_loss"].mean() if n else math.nan,
                   "n_interval": len(inside),
                   "interval": _naive_interval(rows, model),
                   "coverage": inside["covered"].mean() if len(inside) else math.nan,
                   "width": inside["width"].mean() if len(inside) else math.nan,
                   "winkler": wk.estimate, "winkler_lo": wk.lower, "winkler_hi": wk.upper,
                   "validity": asked.loc[asked["answered"], "valid"].mean()}
            if coin:
                ref = part[(part["model"] == coin) & part["scored"]][["task_id", "brier"]]
                pair = own[["task_id", "brier", "session", "ticker"]].merge(
                    ref, on="task_id", suffixes=("", "_ref"))
                sk = skill_ci(pair["brier"], pair["brier_ref"],
                              _naive_clusters(pair, rep.cluster), **boot)
                rec.update(bss_ref=coin, bss_ref_model=coin, bss=sk.estimate, bss_lo=sk.lower,
                           bss_hi=sk.upper, bss_n=sk.n,
                           bss_model_brier=pair["brier"].mean() if len(pair) else math.nan,
                           bss_ref_brier=pair["brier_ref"].mean() if len(pair) else math.nan)
            rec["flag"] = ("descriptive only" if n < rep.min_n or rec["sessions"]
                           < rep.min_sessions else "")
            out.append(rec)
    return pd.DataFrame(out)


def naive_paired_table(data, *, metric: str, paired_difference) -> pd.DataFrame:
    """Every two models merged on task_id (scored rows), clusters as texts."""
    from itertools import combinations

    rep = data.config.report
    rows, out = data.rows, []
    part = "interval_scored" if metric == "winkler" else "scored"
    models = [m for m in data.models if metric != "winkler" or _naive_interval(rows, m) == "given"]
    for a, b in combinations(models, 2):
        ra = rows[(rows["model"] == a) & rows[part]]
        rb = rows[(rows["model"] == b) & rows[part]]
        pair = ra[["task_id", metric, "session", "ticker"]].merge(
            rb[["task_id", metric]], on="task_id", suffixes=("_a", "_b"))
        ci, p = paired_difference(pair[f"{metric}_a"], pair[f"{metric}_b"],
                                  _naive_clusters(pair, rep.cluster),
                                  replicates=rep.bootstrap_replicates, seed=rep.seed,
                                  level=rep.level)
        sessions = int(pair["session"].nunique())
        out.append({"model_a": a, "model_b": b, "metric": metric, "n": ci.n,
                    "sessions": ci.clusters if rep.cluster == "session" else sessions,
                    "diff": ci.estimate, "diff_lo": ci.lower, "diff_hi": ci.upper, "p_value": p,
                    **naive_inference(pair, metric, rep.cluster),
                    "flag": "descriptive only" if ci.n < rep.min_n or sessions < rep.min_sessions
                    else ""})
    table = pd.DataFrame(out)
    return table.assign(p_holm=naive_holm(table["p_value"]), dm_p_holm=naive_holm(table["dm_p"]))


def naive_inference(pair: pd.DataFrame, metric: str, cluster: str) -> dict:
    """The MDE from the clusters' sums by pandas, and the Diebold-Mariano test by
    statsmodels on each session's mean losses (sessions sorted as text: date order)."""
    from statistics import NormalDist

    from statsmodels.tsa.stattools import diebold_mariano_test

    d = pair[f"{metric}_a"] - pair[f"{metric}_b"]
    groups = pd.Series(_naive_clusters(pair, cluster), index=pair.index)
    sums = (d - d.mean()).groupby(groups).sum()
    g = len(sums)
    se = math.inf if g < 2 else math.sqrt(g / (g - 1) * (sums ** 2).sum()) / len(d)
    z = NormalDist()
    by_session = pair.groupby("session")[[f"{metric}_a", f"{metric}_b"]].mean().sort_index()
    t = len(by_session)
    lags = max(0, min(int(4 * (t / 100) ** (2 / 9)), t - 1))  # Newey and West (1994)
    if t >= 3:
        dm = diebold_mariano_test(np.zeros(t), by_session[f"{metric}_a"],
                                  by_session[f"{metric}_b"], lags=lags, harvey_adj=True,
                                  criterion=lambda y, f: np.asarray(f, float))
        stat, p = float(dm.statistic), float(dm.pvalue)
    else:
        stat = p = math.nan
    return {"mde": (z.inv_cdf(0.975) + z.inv_cdf(0.8)) * se, "dm_stat": stat, "dm_p": p,
            "dm_lags": lags}


def naive_holm(p: pd.Series) -> np.ndarray:
    """Holm-adjusted p-values by statsmodels (NaN left out and kept)."""
    from statsmodels.stats.multitest import multipletests

    out = np.full(len(p), np.nan)
    ok = p.notna().to_numpy()
    if ok.any():
        out[ok] = multipletests(p[ok].to_numpy(float), method="holm")[1]
    return out


def _naive_interval(rows: pd.DataFrame, model: str) -> str:
    """"not_applicable" when every valid row of the model says so, else "given"."""
    valid = rows[(rows["model"] == model) & rows["valid"]]
    if len(valid) and (valid["interval_note"] == "not_applicable").all():
        return "not_applicable"
    return "given"


def _naive_clusters(rows: pd.DataFrame, cluster: str):
    if cluster == "session":
        return rows["session"].to_numpy()
    return (rows["session"] + "|" + rows["ticker"]).to_numpy()


def naive_messages(ctx, settings=None) -> list[dict[str, str]]:
    """The prompt of one task rendered from its context's frames with pandas (resampling the
    day's earlier bars, formatting row by row): what ``PromptRenderer`` must equal."""
    return naive_messages_each(ctx, [settings])[0]


def naive_messages_each(ctx, settings_list) -> list[list[dict[str, str]]]:
    """:func:`naive_messages` of one task for each of ``settings_list`` (None: the default);
    the bars, sessions and headlines are rendered once for settings that render them alike
    (the same time zone, anonymisation and names)."""
    from finbench.tracks.intraday.prompt import PromptSettings

    parts: dict = {}
    out = []
    for settings in settings_list:
        settings = settings or PromptSettings()
        key = (settings.timezone, settings.anonymize, settings.zone, repr(settings.names))
        if key not in parts:
            parts[key] = _naive_parts(ctx, settings)
        out.append(_naive_prompt(ctx, settings, *parts[key]))
    return out


def _naive_parts(ctx, settings) -> tuple[str, str, list[str]]:
    """The bars, previous sessions and headlines of a task's prompt, rendered with pandas."""
    import json

    from finbench.tracks.intraday.anonymize import Redactor, redact_dates, relative_day
    from finbench.tracks.intraday.prompt import RECENT_MINUTES

    tz, anon = settings.timezone, settings.anonymize

    def line(label, r):
        return f"{label}  {r.open:.2f}  {r.high:.2f}  {r.low:.2f}  {r.close:.2f}  {int(r.volume)}"

    bars = ctx.bars
    if bars.empty:
        bars_text = "(no trades yet today)"
    else:
        recent_from = ctx.t_forecast - pd.Timedelta(minutes=RECENT_MINUTES)
        old = bars[bars["available_at"] <= recent_from]
        new = bars[bars["available_at"] > recent_from]
        lines = ["start_ET  open  high  low  close  volume"]
        if not old.empty:
            local = old.set_index(old["ts"].dt.tz_convert(tz))
            agg = local.resample("30min", label="left").agg(
                {"open": "first", "high": "max", "low": "min", "close": "last", "volume": "sum"})
            lines.append("-- earlier today, 30min aggregates --")
            lines += [line(f"{ts:%H:%M}", r) for ts, r in agg.dropna(subset=["open"]).iterrows()]
        lines.append(f"-- last {RECENT_MINUTES} minutes, 1-minute bars --")
        lines += [line(pd.Timestamp(r.ts).tz_convert(tz).strftime("%H:%M"), r)
                  for r in new.itertuples()]
        bars_text = "\n".join(lines)
    days = ctx.previous_sessions
    sessions_text = "(none)" if days.empty else "\n".join(
        ["session  open  high  low  close  volume"]
        + [line(relative_day(r.session, ctx.session) if anon else r.session, r)
           for r in days.itertuples()])
    redact = Redactor(settings.names) if anon else None
    news = []
    for r in ctx.headlines.itertuples():
        local = pd.Timestamp(r.available_at).tz_convert(tz)
        news.append(json.dumps({
            f"available_{settings.zone}": (f"{relative_day(local, ctx.session)} {local:%H:%M}"
                                           if anon else local.strftime("%Y-%m-%d %H:%M")),
            "source": r.source,
            "headline": redact_dates(redact(r.headline), ctx.session) if anon else r.headline},
            ensure_ascii=False))
    return bars_text, sessions_text, news


def _naive_prompt(ctx, settings, bars_text: str, sessions_text: str, news: list[str]
                  ) -> list[dict[str, str]]:
    from finbench.tracks.intraday.anonymize import alias
    from finbench.tracks.intraday.prompt import system_message, user_message

    tz, anon = settings.timezone, settings.anonymize
    user = user_message(
        settings=settings, ticker=alias(ctx.ticker) if anon else ctx.ticker,
        session=ctx.session, horizon=ctx.horizon,
        t_clock=ctx.t_forecast.tz_convert(tz).strftime("%H:%M"),
        target_clock=ctx.t_target.tz_convert(tz).strftime("%H:%M"), bars=bars_text,
        sessions=sessions_text, headlines="\n".join(news) if news else "(none)")
    return [{"role": "system", "content": system_message(settings)},
            {"role": "user", "content": user}]


def naive_group_bootstrap(errors: list, groups, *, reps: int, seed: int, level: float,
                          stat) -> tuple[float, float]:
    """A percentile interval (numpy's default, linear) of ``stat(sums of each error array,
    count)`` over replicates drawing whole groups with replacement, written out: what
    :func:`finbench.scoring.bootstrap.mean_ci` and ``skill_ci`` must give on event groups."""
    import numpy as np

    keys, where = np.unique(groups, return_inverse=True)
    if len(keys) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(len(keys), np.full(len(keys), 1 / len(keys)), size=reps)
    values = []
    for counts in draws:
        weights = counts[where].astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            values.append(stat(*(float(np.sum(weights * e)) for e in errors),
                               float(weights.sum())))
    values = np.array([v for v in values if np.isfinite(v)])
    if not len(values):
        return math.nan, math.nan
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return float(lo), float(hi)


def naive_event_score_row(rows: pd.DataFrame, name: str, cut, s) -> dict:
    """A model's event scores in one slice, its rows filtered from the whole table with
    pandas: what :func:`finbench.tracks.events.scores.slice_score_rows` must give per slice."""
    from finbench.tracks.events.score_rows import brier_parts, effective_events, log_loss

    _, _, where = cut  # (the slice's rows, as positions)
    mask = np.zeros(len(rows), bool)
    mask[where] = True
    mine = rows[mask & (rows["model"] == name).to_numpy(bool)]
    scored = mine[mine["scored"]]
    p, y = scored["p_up"].to_numpy(float), scored["y"].to_numpy(float)
    parts = brier_parts(p, y)
    answered = int((mine["answer_status"] == "answered").sum())
    lo, hi = naive_group_bootstrap([scored["brier"].to_numpy(float)], scored["event_group"].to_numpy(),
                             reps=s.bootstrap_replicates, seed=s.seed, level=s.level,
                             stat=lambda e, n: e / n)
    return {"tasks": len(mine), "n_error": int((mine["answer_status"] == "error").sum()),
            "n_invalid": answered - parts["n"],
            "validity": parts["n"] / answered if answered else math.nan, **parts,
            "log_loss": log_loss(p, y, s.log_loss_clip), "brier_lo": lo, "brier_hi": hi,
            "groups": int(scored["event_group"].nunique()),
            "effective_events": effective_events(scored["event_group"].to_numpy())}


def naive_event_skill_row(rows: pd.DataFrame, name: str, ref: str, cut, s) -> dict:
    """Skill of ``name`` against ``ref`` in one slice: both models' scored rows of the slice
    filtered with pandas and merged on the task."""
    from finbench.tracks.events.score_rows import brier_parts, log_loss

    _, _, where = cut  # (the slice's rows, as positions)
    mask = np.zeros(len(rows), bool)
    mask[where] = True
    mine = rows[mask & (rows["model"] == name).to_numpy(bool) & rows["scored"].to_numpy(bool)]
    theirs = rows[mask & (rows["model"] == ref).to_numpy(bool) & rows["scored"].to_numpy(bool)]
    both = mine.merge(theirs[["task_id", "p_up", "brier", "log_loss"]], on="task_id",
                      suffixes=("", "_ref"))
    y = both["y"].to_numpy(float)
    bm = brier_parts(both["p_up"].to_numpy(float), y)
    br = brier_parts(both["p_up_ref"].to_numpy(float), y)
    lo, hi = naive_group_bootstrap([both["brier"].to_numpy(float), both["brier_ref"].to_numpy(float)],
                             both["event_group"].to_numpy(), reps=s.bootstrap_replicates,
                             seed=s.seed, level=s.level, stat=lambda a, b, n: 1 - a / b)
    return {"n": bm["n"], "positives": bm["positives"], "brier_model": bm["brier"],
            "brier_reference": br["brier"], "bss_lo": lo, "bss_hi": hi,
            "log_loss_model": log_loss(both["p_up"].to_numpy(float), y, s.log_loss_clip),
            "log_loss_reference": log_loss(both["p_up_ref"].to_numpy(float), y,
                                           s.log_loss_clip)}


def naive_bm25_scores(texts: list[str], query: str):
    """BM25 of ``texts`` against ``query`` from a ``bm25s`` index built of those texts alone
    (a task's window): what :class:`finbench.core.bm25.PostIndex` must give,
    queried with that window, bit for bit."""
    import bm25s
    import numpy as np

    if not texts:
        return np.zeros(0)
    corpus = bm25s.tokenize(texts, stopwords="en", show_progress=False)
    if not corpus.vocab:  # every text is stopwords or shorter than a term (bm25s raises)
        return np.zeros(len(texts))
    index = bm25s.BM25()
    index.index(corpus, show_progress=False)
    terms = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
    known = [t for t in terms if t in corpus.vocab]
    if not known:
        return np.zeros(len(texts))
    return np.asarray(index.get_scores(known), dtype=np.float64)


def naive_term_scores(lengths, tf, idf, mean_length: float):
    """A term's BM25 score of each post, one post at a time, as ``bm25s`` computes a post's
    (its Lucene variant: ``tf / (k1 * ((1 - b) + b * length / mean_length) + tf)`` with the
    length a Python int and the mean a float64, times the term's float32 idf), in float64
    before any rounding to float32: what :func:`finbench.core.bm25._pair_scores` must give,
    bit for bit."""
    import numpy as np

    k1, b = 1.5, 0.75
    out = []
    for length, count in zip(lengths, tf, strict=True):
        count = np.float32(count)
        out.append(np.float64(idf) * (count / (k1 * ((1 - b) + b * int(length)
                                                      / np.float64(mean_length)) + count)))
    return np.array(out, np.float64)


def naive_json_object(line: str):
    """A JSON-lines file's line through ``json.loads`` whole: its object, or ``not JSON
    (message)``, or ``a JSON object per line (got type)``: what
    :func:`finbench.data.user_files.json_object` must give, value for value."""
    import json

    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg})"
    if not isinstance(value, dict):
        return f"a JSON object per line (got {type(value).__name__})"
    return value


def naive_parse_instants(values):
    """Times with a zone as UTC, one value at a time with ``pd.Timestamp`` (what the event
    track's readers did): what :func:`finbench.tracks.events.markets.parse_instants` must
    give, value for value."""
    import numpy as np
    import pandas as pd

    from finbench.data.timestamps import END, FIRST

    first, end = FIRST.tz_localize("UTC"), END.tz_localize("UTC")
    out = pd.Series(pd.NaT, index=values.index, dtype="datetime64[ns, UTC]")
    bad = np.zeros(len(values), dtype=bool)
    for i, value in enumerate(values):
        try:
            stamp = pd.Timestamp(value)
        except (TypeError, ValueError):
            bad[i] = True
            continue
        if pd.isna(stamp) or stamp.tzinfo is None or not first <= stamp < end:
            bad[i] = True
        else:
            out.iat[i] = stamp.tz_convert("UTC")
    return out, bad


def naive_dump_post(line: str, number: int) -> tuple[tuple | None, list[str]]:
    """One line of a posts dump, every rule checked in turn with no fast path: ``((post_id,
    created ns, subreddit, kind, text), [])`` or ``(None, problems)``."""
    import json

    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, [f"line {number}: not JSON ({exc.msg})"]
    if not isinstance(obj, dict):
        return None, [f"line {number}: a JSON object per line (got {type(obj).__name__})"]
    why = []
    ident = obj.get("id")
    if not isinstance(ident, str) or not ident.strip() or any(c.isspace() for c in ident):
        why.append(f"id {ident!r}: a non-empty text without whitespace")
    value = obj.get("created_utc")
    created = _naive_seconds(value)
    if created is None:
        why.append(f"created_utc {value!r}: whole seconds since 1970 between 2005 and 2100")
    kind = text = None
    if "title" in obj:
        title, body = obj.get("title"), obj.get("selftext")
        body = body if isinstance(body, str) else ""
        kind = "t3"
        text = None if not isinstance(title, str) else (
            title if not body.strip() else f"{title}\n\n{body}")
    elif "body" in obj:
        kind, text = "t1", obj.get("body")
    else:
        why.append("neither title (a submission) nor body (a comment)")
    if kind and not isinstance(text, str):
        why.append("title/selftext or body: text")
    subreddit = obj.get("subreddit")
    if not isinstance(subreddit, str) or not subreddit:
        why.append(f"subreddit {subreddit!r}: a non-empty text")
    for name, value in (("id", ident), ("subreddit", subreddit),
                        ("title/selftext or body", text)):
        if isinstance(value, str) and any("\ud800" <= c <= "\udfff" for c in value):
            why.append(f"{name}: holds an unpaired surrogate (an escape \\ud800-\\udfff "
                       "alone), which is no Unicode text")
    if why:
        return None, [f"line {number}: {w}" for w in why]
    return (f"{kind}_{ident}", created * 1_000_000_000, subreddit,
            "submission" if kind == "t3" else "comment", text), []


def _naive_seconds(value) -> int | None:
    """Whole seconds from 2005 to 2100, given as a number or as a numeric text."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if math.isfinite(number) and number == int(number) and (
            1104537600 <= int(number) < 4102444800):  # 2005-01-01 to 2100-01-01
        return int(number)
    return None


def naive_tool_bars(store, ticker: str, first, last, width: int, zone: str) -> list[dict]:
    """The ``bars`` tool's items, naively: the store's bars of the window's local dates read
    whole, those started at or after ``first`` and complete by ``last`` kept, grouped by pandas
    into buckets of ``width`` seconds of the local wall clock from midnight."""
    bars = store.read_bars(tickers=[ticker], start=first.tz_convert(zone).date(),
                           end=last.tz_convert(zone).date())
    done = bars["ts"] + pd.Timedelta(seconds=store.bar_seconds)
    bars = bars[(bars["ts"] >= first) & (done <= last)]
    if bars.empty:
        return []
    local = bars["ts"].dt.tz_convert(zone).dt.tz_localize(None)
    midnight = local.dt.normalize()
    offset = (local - midnight).dt.total_seconds().astype("int64") // width * width
    start = (midnight + pd.to_timedelta(offset, unit="s")).dt.tz_localize(zone)
    out = bars.assign(bucket=start.to_numpy()).groupby("bucket", sort=True).agg(
        open=("open", "first"), high=("high", "max"), low=("low", "min"),
        close=("close", "last"), volume=("volume", "sum"), bars=("ts", "size"),
        last=("ts", "max"))
    utc = "%Y-%m-%dT%H:%M:%SZ"
    return [{"start": b.tz_convert("UTC").strftime(utc), "open": r.open, "high": r.high,
             "low": r.low, "close": r.close, "volume": r.volume, "bars": int(r.bars),
             "available_at": (r.last + pd.Timedelta(seconds=store.bar_seconds))
             .tz_convert("UTC").strftime(utc)}
            for b, r in zip(out.index, out.itertuples(), strict=True)]


def naive_board(track: str, parts: list, reference: str | None, *, skill_ci, adjusted,
                cutoff_sides, columns) -> tuple[pd.DataFrame, list[str]]:
    """A leaderboard's board as sets of task ids and pandas filters: the tasks whose labels
    differ between runs left out, each entry's scored rows, the tasks every entry scored,
    the reference's Brier on them (its first row of a task), each entry's skill interval
    (``skill_ci(errors, reference errors, cluster codes)``) on them in task-id order."""
    frames, tools, prompts = [], {}, {}
    for label, rows, cluster, agents, variants in parts:
        prompts.update({f"{label}/{m}": v for m, v in variants.items()})
        memorised = (rows["possibly_memorised"].astype("boolean") if "possibly_memorised" in rows
                     else pd.array([pd.NA] * len(rows), "boolean"))
        frames.append(pd.DataFrame({
            "run": label, "entry": label + "/" + rows["model"].astype(str),
            "task_id": rows["task_id"].astype(str), "y": rows["y"].astype(float),
            "brier": rows["brier"].astype(float), "scored": rows["scored"].astype(bool),
            "cluster": rows[cluster].astype(str), "memorised": memorised}))
        for m in rows["model"].astype(str).unique():
            tools[f"{label}/{m}"] = "yes" if m in agents else "no"
    rows = pd.concat(frames, ignore_index=True)
    notes = []
    labels = rows.dropna(subset=["y"]).groupby("task_id")["y"].nunique()
    conflict = set(labels.index[labels > 1])
    if conflict:
        notes.append(f"{track}: {len(conflict)} task(s) whose labels differ between runs (other "
                     "snapshots) are left out of every comparison")
    rows = rows[~rows["task_id"].isin(conflict)]
    scored = rows[rows["scored"]]
    entries = list(dict.fromkeys(rows["entry"]))
    run_of = dict(zip(rows["entry"], rows["run"], strict=True))
    ref_entry = (None if reference is None
                 else next((e for e in entries if e.endswith("/" + reference)), None))
    if reference is None:
        notes.append(f"{track}: its first run names no reference (give --reference): no skill")
    elif ref_entry is None:
        notes.append(f"{track}: no model named {reference!r} in the runs: no skill")
    per_entry = {e: g for e, g in scored.groupby("entry", sort=False)}
    shared = set.intersection(*(set(g["task_id"]) for g in per_entry.values())) \
        if per_entry else set()
    ref_rows = per_entry.get(ref_entry)
    ref_brier = (ref_rows.drop_duplicates("task_id").set_index("task_id")["brier"]
                 if ref_rows is not None else None)
    fitted = adjusted(scored, entries)
    out = []
    for e in entries:
        mine = per_entry.get(e)
        record = {"track": track, "model": e, "run": run_of[e], "tools": tools.get(e, "no"),
                  "prompt": prompts.get(e, ""), **cutoff_sides(mine),
                  "n": 0 if mine is None else len(mine),
                  "brier": np.nan if mine is None else float(mine["brier"].mean()),
                  "n_shared": 0, "brier_shared": np.nan, "bss_shared": np.nan,
                  "bss_lo": np.nan, "bss_hi": np.nan, "clusters": 0,
                  "brier_adjusted": fitted.get(e, np.nan), "reference": ref_entry or ""}
        if mine is not None and shared:
            on = mine[mine["task_id"].isin(shared)].sort_values("task_id", kind="stable")
            record.update(n_shared=len(on), brier_shared=float(on["brier"].mean()))
            if ref_brier is not None:
                ci = skill_ci(on["brier"].to_numpy(),
                              ref_brier.reindex(on["task_id"]).to_numpy(),
                              pd.factorize(on["cluster"], sort=True)[0])
                record.update(bss_shared=ci.estimate, bss_lo=ci.lower, bss_hi=ci.upper,
                              clusters=ci.clusters)
        out.append(record)
    return pd.DataFrame(out, columns=columns), notes


def naive_canonical_tables(tables: dict) -> str:
    """The canonical JSON of score tables (name: Arrow table) as ``json.dumps`` of every
    value made plain one at a time: a float rounded to 12 places by Python (NaN as null, an
    infinity as the text "inf" or "-inf"), None, bools, ints and texts as they are, anything
    else as ``str`` of it."""
    import json

    def plain(value):
        if isinstance(value, float) and math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if isinstance(value, float):
            return None if math.isnan(value) else round(value, 12) + 0.0
        if value is None or isinstance(value, bool | int | str):
            return value
        return str(value)

    out = {name: {"columns": table.column_names,
                  "rows": [[plain(v) for v in row.values()] for row in table.to_pylist()]}
           for name, table in tables.items()}
    return json.dumps(out, sort_keys=True, separators=(",", ":"), allow_nan=False)


def naive_class_table(config, rows: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """The three-class scores per model and slice, each cell's rows filtered out of the whole
    frame by its slice value and then by its model, and reduced by pandas (the table as
    ``scores3`` computed it before it put the rows in order once)."""
    from finbench.tracks.intraday.config import CLASS_BASELINE_KINDS
    from finbench.tracks.intraday.scores3 import BELOW_MIN, SLICE_KINDS

    references = [m.name for m in config.models
                  if m.kind in CLASS_BASELINE_KINDS and m.name in names]
    order = {h: i for i, h in enumerate(config.tasks.horizons)}
    out = []
    for kind in SLICE_KINDS:
        key = None if kind == "overall" else kind
        values = ["all"] if key is None else sorted(
            rows[key].dropna().unique(), key=lambda v: (order.get(v, 99), v))
        for value in values:
            part = rows if key is None else rows[rows[key] == value]
            for name in names:
                mine = part[part["model"] == name]
                scored = mine[mine["scored"]]
                answered = int(mine["answered"].sum())
                valid = mine[mine["valid"]]
                excluded = valid["excluded_mass"].dropna()
                row = {"model": name, "slice_kind": kind, "slice": str(value),
                       "n_tasks": len(mine), "n_valid": len(valid),
                       "n_error": len(mine) - answered,
                       "validity": len(valid) / answered if answered else np.nan,
                       "n": len(scored),
                       **{m: scored[m].mean() if len(scored) else np.nan
                          for m in ("brier", "log_loss", "rps", "accuracy")},
                       "excluded_mass_mean": excluded.mean() if len(excluded) else np.nan,
                       "excluded_mass_median": excluded.median() if len(excluded) else np.nan,
                       "excluded_mass_max": excluded.max() if len(excluded) else np.nan,
                       "n_below_min_mass": int(
                           mine["error"].fillna("").str.startswith(BELOW_MIN).sum()),
                       "n_fallback": int(valid["p_fallback"].notna().sum())}
                for ref in references:
                    theirs = part[(part["model"] == ref) & part["scored"]].set_index("task_id")
                    both = scored[scored["task_id"].isin(theirs.index)]
                    for loss, prefix in (("brier", "bss3"), ("rps", "rpss3")):
                        own = both[loss].sum()
                        other = theirs.loc[both["task_id"], loss].sum()
                        row[f"{prefix}_{ref}"] = (1 - own / other if len(both) and other
                                                  else np.nan)
                    row[f"bss3_{ref}_n"] = len(both)
                out.append(row)
    return pd.DataFrame(out)


def naive_class_intervals(table: pd.DataFrame, rows: pd.DataFrame, data) -> pd.DataFrame:
    """The report's three-class table with its intervals, each row's cell filtered out of the
    whole frame of scored rows by its slice and then by its model (as ``report3`` computed it
    before it grouped the rows once)."""
    from finbench.reports.stats import descriptive
    from finbench.scoring.bootstrap import mean_ci, skill_ci
    from finbench.tracks.intraday.config import CLASS_BASELINE_KINDS
    from finbench.tracks.intraday.report_data import cluster_codes_of

    rep = data.config.report
    boot = {"replicates": rep.bootstrap_replicates, "seed": rep.seed, "level": rep.level,
            "draws": data.draws}
    refs = [m.name for m in data.config.models if m.kind in CLASS_BASELINE_KINDS]
    clusters = cluster_codes_of(rows, rep.cluster)
    out = table.copy()
    out["sessions"], out["flag"] = 0, ""
    for i, r in table.iterrows():
        part = rows if r["slice_kind"] == "overall" else rows[rows[r["slice_kind"]] == r["slice"]]
        mine = part[part["model"] == r["model"]]
        out.loc[i, "sessions"] = sessions = int(mine["session"].nunique())
        out.loc[i, "flag"] = descriptive(len(mine), sessions, min_n=rep.min_n,
                                         min_clusters=rep.min_sessions)
        if r["slice_kind"] == "ticker":
            continue
        cl = clusters[mine.index]
        for col in ("brier", "rps"):
            ci = mean_ci(mine[col].to_numpy(), cl, **boot)
            out.loc[i, f"{col}_lo"], out.loc[i, f"{col}_hi"] = ci.lower, ci.upper
        for ref in refs:
            theirs = part[part["model"] == ref].set_index("task_id")["brier"]
            both = mine[mine["task_id"].isin(theirs.index)]
            if len(both):
                ci = skill_ci(both["brier"].to_numpy(), theirs.loc[both["task_id"]].to_numpy(),
                              clusters[both.index], **boot)
                out.loc[i, f"bss3_{ref}_lo"], out.loc[i, f"bss3_{ref}_hi"] = ci.lower, ci.upper
    return out
