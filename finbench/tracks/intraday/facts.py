"""What a run says about its tasks before anything is paid for: scorability warnings (or the
error that nothing can be scored) and the manifest's facts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from finbench.core.errors import RunError
from finbench.core.lookup import encoded
from finbench.tracks.intraday.labels import NO_BARS, NO_REFERENCE, NO_TARGET, status_counts
from finbench.tracks.intraday.plan import Plan


def scorability(plan: Plan, labels: pd.DataFrame) -> list[str]:
    """Warnings about tasks that cannot be scored for a reason the user may not expect (a
    ticker without bars, sessions outside the store's dates), with counts; a RunError when
    the run has no task at all, or none can be scored (before anything is paid for)."""
    spec = plan.config.tasks
    excluded = plan.excluded["reason"].value_counts().to_dict()
    if plan.tasks.empty:
        why = (f"every session is left out ({', '.join(f'{k}: {v} tasks' for k, v in excluded.items())}"
               f"; the target {spec.target} is at or after the close)" if excluded
               else f"the exchange {spec.calendar} holds no session in it")
        raise RunError(f"no tasks: {spec.start}..{spec.end} gives none: {why}")
    warnings = []
    ok = (labels["status"] == "ok").to_numpy(bool)
    names, code = encoded(plan.tasks["ticker"])
    scorable = np.bincount(code, weights=ok, minlength=len(names))
    dead = [t for t, n in zip(names, scorable, strict=True) if n == 0]
    if dead:
        count = int(np.bincount(code, minlength=len(names))[scorable == 0].sum())
        warnings.append(f"{', '.join(dead)}: no scorable task on these dates (no bars in the "
                        f"store at the horizons and target?): {count} tasks unscorable")
    dates = plan.store.dates("bars")
    sessions = plan.tasks["session"]
    if dates:
        first, last = dates[0].isoformat(), dates[-1].isoformat()
        out = ((sessions < first) | (sessions > last)).to_numpy(bool)
        outside = sessions[out].unique()
        if len(outside):
            warnings.append(f"{len(outside)} session(s) lie outside the store's dates "
                            f"{first}..{last} ({outside[0]}..{outside[-1]}): {int(out.sum())} "
                            "tasks unscorable")
    warnings += [f"{line} ({spec.start}..{spec.end})" for line in _open_gaps(plan.tasks, labels)]
    if not ok.any():
        counts = labels["status"].value_counts().to_dict()
        raise RunError(f"nothing can be scored: all {len(labels)} tasks are unscorable "
                       f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})"
                       + (f"; {'; '.join(warnings)}" if warnings else ""))
    return warnings


def summary(plan: Plan, labels: pd.DataFrame) -> dict:
    """The manifest's facts about the tasks: counts, exclusions (tasks and sessions, by
    reason), label statuses, the data snapshot."""
    excluded = plan.excluded.assign(session=plan.excluded["task_id"].str.split("|").str[1])
    return {
        "tasks": len(plan.tasks),
        "excluded": excluded["reason"].value_counts().sort_index().to_dict(),
        "excluded_sessions": excluded.groupby("reason")["session"].nunique().sort_index()
        .to_dict(),
        "labels": status_counts(labels),
        "history_tasks": len(plan.history_tasks),
        "store_snapshot_sha256": plan.store.snapshot_sha256,
        "synthetic": plan.store.synthetic,
    }


WHY = {
    NO_BARS: "the store holds no bar of the ticker in the session's regular hours (a day the "
             "data lacks)",
    NO_REFERENCE: "no bar ends at the forecast time (docs/spec.md §5: the reference price is "
                  "the mid of the bar that ends then)",
    NO_TARGET: "no bar ends at the target time",
}


def unscorable_notes(tasks: pd.DataFrame, labels: pd.DataFrame) -> list[str]:
    """Lines saying why the unscorable tasks of a run are so, by reason with their counts
    (by horizon; the ticker-sessions without bars), and what would score them; none when
    every task is scorable. ``labels`` in task order."""
    status = labels["status"].astype(str).to_numpy()
    bad = status != "ok"
    if not bad.any():
        return []
    lines = [f"Unscorable tasks (left out of every score): {int(bad.sum())} of {len(status)}"]
    horizons = list(dict.fromkeys(tasks["horizon"]))
    for reason in (NO_BARS, NO_REFERENCE, NO_TARGET):
        mine = status == reason
        if not mine.any():
            continue
        per = ", ".join(f"{h} {int((mine & (tasks['horizon'] == h).to_numpy()).sum())} of "
                        f"{int((tasks['horizon'] == h).sum())}" for h in horizons)
        extra = ""
        if reason == NO_BARS:
            days = tasks.loc[mine, ["ticker", "session"]].drop_duplicates()
            extra = (f"; {len(days)} ticker-session(s), e.g. {days['ticker'].iloc[0]} "
                     f"{days['session'].iloc[0]}")
        lines.append(f"  {reason}: {int(mine.sum())} ({per}): {WHY[reason]}{extra}")
    lines += [f"  {line}" for line in _open_gaps(tasks, labels)]
    return lines


def _open_gaps(tasks: pd.DataFrame, labels: pd.DataFrame) -> list[str]:
    """What to do when the tasks asked at the session's open have no reference price on most
    of the sessions with bars: the bar that ends at the open is the pre-market one, which
    bars of the regular session alone lack."""
    at_open = (tasks["t_forecast"] == tasks["session_open"]).to_numpy(bool)
    status = labels["status"].astype(str).to_numpy()
    with_bars = at_open & (status != NO_BARS)
    missing = with_bars & (status == NO_REFERENCE)
    if not with_bars.any() or missing.sum() * 2 <= with_bars.sum():
        return []
    horizons = ", ".join(dict.fromkeys(tasks.loc[missing, "horizon"]))
    return [f"{horizons} at the session's open: {int(missing.sum())} of {int(with_bars.sum())} "
            "such tasks on days with bars have no reference price, because no bar ends at the "
            "open (the pre-market bar just before it): ingest bars with extended hours, or ask "
            "horizons after the open ([tasks] horizons)"]
