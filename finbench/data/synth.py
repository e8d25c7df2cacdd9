"""Synthetic (not real) minute bars and headlines for the bundled sample, reproducible by seed.

What it imitates, so that every rule of the pipeline is exercised: extended hours 04:00-20:00 ET
with sparse trading outside the regular session (a 09:29 bar usually, not always, exists),
U-shaped intraday volatility, overnight gaps, minutes without a trade (no row), one trading
halt, cent prices (so ties r = 0 occur), headlines through the day of which some carry a weak
signal about the rest of the day, and planted canary headlines that give a day's outcome away
and are available only after the target, two of them back-dated (``published_at`` early,
``first_seen_at`` late), to prove the time gate.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from finbench.core.calendar import get_calendar, parse_session_date
from finbench.core.errors import StoreError
from finbench.data.store import Store

SYNTH_VERSION = 1
DEFAULT_SEED = 20250115
CANARY_MARK = "CANARY"
LOCAL_TZ = "America/New_York"


@dataclass(frozen=True)
class TickerSpec:
    ticker: str
    company: str
    price: float
    daily_vol: float
    volume: float


DEFAULT_TICKERS = (
    TickerSpec("AAPL", "Apple", 228.0, 0.014, 9_000.0),
    TickerSpec("MSFT", "Microsoft", 435.0, 0.013, 5_000.0),
    TickerSpec("NVDA", "Nvidia", 118.0, 0.030, 40_000.0),
)
HALT = ("NVDA", "2024-12-10", "13:05", "13:35")  # ticker, date, first and last+1 halted minute (ET)

GOOD = (
    "{c} shares rise as analysts lift price targets",
    "{c} said to win large enterprise contract",
    "{c} supplier reports strong orders",
    "Options traders pile into {t} calls",
)
BAD = (
    "{c} shares slip on report of slowing demand",
    "Regulators widen inquiry into {c}",
    "{c} supplier warns on quarterly orders",
    "Analyst downgrades {t} to neutral",
)
NEUTRAL = (
    "{c} to present at industry conference",
    "{c} schedules quarterly earnings call",
    "{t} among most active stocks in early trading",
    "{c} names new head of investor relations",
)


def synth_sessions(end: str = "2025-01-15", count: int = 80, calendar: str = "XNYS") -> list:
    """The ``count`` sessions up to and including ``end`` (naive dates)."""
    last = parse_session_date(end, what="end")
    first = last - pd.Timedelta(days=int(count * 1.6) + 10)
    cal = get_calendar(calendar, first, last)
    sessions = cal.sessions_in_range(first, last)
    return list(sessions[-count:]), cal


def generate(
    *,
    seed: int = DEFAULT_SEED,
    end: str = "2025-01-15",
    sessions: int = 80,
    tickers: tuple[TickerSpec, ...] = DEFAULT_TICKERS,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (bars, headlines) frames in the store's canonical columns."""
    days, cal = synth_sessions(end, sessions)
    root = np.random.SeedSequence(seed)
    bars_parts, news_parts = [], []
    for spec, child in zip(tickers, root.spawn(len(tickers)), strict=True):
        rng = np.random.default_rng(child)
        log_price = np.log(spec.price)
        for day in days:
            open_utc = cal.session_open(day).tz_convert("UTC")
            close_utc = cal.session_close(day).tz_convert("UTC")
            log_price += rng.normal(0.0, spec.daily_vol * 0.35)  # overnight gap
            bars, path, minutes = _day_bars(rng, spec, day, open_utc, close_utc, log_price)
            log_price = path[-1]
            bars_parts.append(bars)
            news_parts.append(_day_headlines(rng, spec, day, path, minutes, close_utc))
    bars = pd.concat(bars_parts, ignore_index=True)
    bars = bars.sort_values(["ticker", "ts"], kind="stable").reset_index(drop=True)
    news = pd.concat(news_parts, ignore_index=True)
    news = news.sort_values(["available_at", "id"], kind="stable").reset_index(drop=True)
    return bars, news


def _day_bars(rng, spec: TickerSpec, day, open_utc, close_utc, start_log: float):
    local0 = pd.Timestamp(day).tz_localize(LOCAL_TZ) + pd.Timedelta(hours=4)
    ext_end = min(close_utc + pd.Timedelta(hours=4), (local0 + pd.Timedelta(hours=16)))
    minutes = pd.date_range(local0.tz_convert("UTC"), ext_end, freq="1min", inclusive="left")
    n = len(minutes)
    regular = (minutes >= open_utc) & (minutes < close_utc)
    pos = np.clip((minutes - open_utc) / (close_utc - open_utc), 0.0, 1.0).to_numpy(float)
    u_shape = 1.0 + 2.5 * np.exp(-pos / 0.06) + 1.2 * np.exp(-(1.0 - pos) / 0.05)
    sigma_min = spec.daily_vol / np.sqrt(390) / 1.35
    sigma = np.where(regular, sigma_min * u_shape, sigma_min * 0.35)
    steps = rng.standard_t(df=5, size=n) * sigma * np.sqrt(3 / 5)
    path = start_log + np.concatenate([[0.0], np.cumsum(steps)])  # log price at minute edges
    pre = minutes < open_utc
    to_open = ((open_utc - minutes) / pd.Timedelta(minutes=1)).to_numpy(float)
    from_close = ((minutes - close_utc) / pd.Timedelta(minutes=1)).to_numpy(float)
    p_trade = np.where(
        regular, 0.994,
        np.where(pre, 0.04 + 0.86 * np.exp(-(to_open - 1) / 60), 0.55 * np.exp(-from_close / 90)),
    )
    traded = rng.random(n) < p_trade
    if spec.ticker == HALT[0] and str(pd.Timestamp(day).date()) == HALT[1]:
        local = minutes.tz_convert(LOCAL_TZ)
        hhmm = local.strftime("%H:%M")
        traded &= ~((hhmm >= HALT[2]) & (hhmm < HALT[3]))
    o = np.exp(path[:-1])
    c = np.exp(path[1:])
    wick = np.abs(rng.normal(0.0, 0.6, size=(2, n))) * sigma
    hi = np.maximum(o, c) * np.exp(wick[0])
    lo = np.minimum(o, c) * np.exp(-wick[1])
    o, c, hi, lo = (np.round(x, 2) for x in (o, c, hi, lo))
    hi = np.maximum.reduce([hi, o, c])
    lo = np.minimum.reduce([lo, o, c])
    vol_scale = np.where(regular, spec.volume * u_shape, spec.volume * 0.03)
    volume = np.round(vol_scale * rng.lognormal(0.0, 0.5, n))
    bars = pd.DataFrame(
        {"ticker": spec.ticker, "ts": minutes, "open": o, "high": hi, "low": lo, "close": c,
         "volume": volume}
    )[traded]
    return bars, path, minutes


def _day_headlines(rng, spec: TickerSpec, day, path, minutes, close_utc) -> pd.DataFrame:
    date = pd.Timestamp(day).date()
    local_day = pd.Timestamp(day).tz_localize(LOCAL_TZ)
    target = min(local_day + pd.Timedelta(hours=15, minutes=55), close_utc - pd.Timedelta(minutes=5))
    target_idx = int(np.searchsorted(minutes, target.tz_convert("UTC")))
    rows = []
    count = int(rng.integers(2, 6))
    stamps = np.sort(rng.integers(6 * 60, 15 * 60, size=count))  # minutes after local midnight
    for k, minute in enumerate(stamps):
        t = local_day + pd.Timedelta(minutes=int(minute)) + pd.Timedelta(seconds=int(rng.integers(60)))
        idx = int(np.searchsorted(minutes, t.tz_convert("UTC")))
        rest = path[target_idx] - path[min(idx, target_idx)]
        roll = rng.random()
        if roll < 0.35:  # weak signal: polarity agrees with the rest of the day 65% of the time
            agrees = rng.random() < 0.65
            good = (rest > 0) == agrees
            template = GOOD if good else BAD
        else:
            template = (GOOD, BAD, NEUTRAL, NEUTRAL)[int(rng.integers(4))]
        text = template[int(rng.integers(len(template)))].format(c=spec.company, t=spec.ticker)
        rows.append(_headline(f"syn-{spec.ticker}-{date}-{k}", t, None, spec.ticker, text))
    # Canaries: give the day's outcome away, available only after the target.
    day_move = path[target_idx] - path[0]
    word = "ABOVE" if day_move > 0 else "BELOW"
    text = (f"{CANARY_MARK} {spec.ticker} {date}: the 15:55 mid ended {word} the 04:00 level "
            f"({day_move:+.4f} log) [synthetic leak canary]")
    rows.append(_headline(f"canary-{spec.ticker}-{date}", target + pd.Timedelta(minutes=10),
                          None, spec.ticker, text))
    if date.day in (3, 17):  # back-dated canary: published_at before the open, seen after target
        rows.append(_headline(
            f"canary-backdated-{spec.ticker}-{date}", local_day + pd.Timedelta(hours=9),
            target + pd.Timedelta(minutes=15), spec.ticker, text + " (back-dated)",
        ))
    return pd.DataFrame(rows)


def _headline(hid: str, published, first_seen, ticker: str, text: str) -> dict:
    pub = pd.Timestamp(published).tz_convert("UTC")
    seen = pd.Timestamp(first_seen).tz_convert("UTC") if first_seen is not None else pd.NaT
    return {
        "id": hid,
        "published_at": pub,
        "first_seen_at": seen,
        "available_at": pub if seen is pd.NaT else max(pub, seen),
        "tickers": [ticker],
        "headline": text,
        "source": "synthetic-wire",
        "body": None,
    }


def write_sample(out: str | Path, *, seed: int = DEFAULT_SEED) -> Store:
    """Generate the synthetic sample into ``out`` (replacing an earlier synthetic store there)."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        try:
            old = Store(out)
        except StoreError as exc:
            raise StoreError(f"{out}: exists and is not a FinBench store; not overwriting") from exc
        if not old.synthetic:
            raise StoreError(f"{out}: holds a non-synthetic store; not overwriting")
        shutil.rmtree(out)
    bars, news = generate(seed=seed)
    description = (
        f"SYNTHETIC data (not real market data): generated by finbench.data.synth "
        f"v{SYNTH_VERSION}, seed {seed}"
    )
    store = Store.open_or_create(out, synthetic=True, description=description)
    source = {"generator": "finbench.data.synth", "version": SYNTH_VERSION, "seed": seed}
    store.add_bars(bars, sources=[source])
    store.add_headlines(news, sources=[source])
    return store


__all__ = ["generate", "write_sample", "CANARY_MARK", "DEFAULT_SEED"]
