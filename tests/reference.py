"""Naive reference implementations (a Python loop per task with pandas filters).

Written straight from SPEC §4-5 without sharing code with ``finbench.labels``/``finbench.gate``,
so the vectorised versions are checked against an independent answer.
"""

from __future__ import annotations

import math

import pandas as pd


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
        if p_ref is None:
            rows.append((task.task_id, "no_reference_price", None, None))
        elif p_tgt is None:
            rows.append((task.task_id, "no_target_price", None, None))
        else:
            r = math.log(p_tgt / p_ref)
            rows.append((task.task_id, "ok", r, 1 if r > 0 else 0))
    return pd.DataFrame(rows, columns=["task_id", "status", "r", "y"])


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
    """For one task, from SPEC §7 read literally: the last ``window`` resolved labels of the
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
