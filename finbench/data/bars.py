"""Sorted bar arrays with per-ticker offsets, and vectorised as-of look-ups on them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from finbench.core.times import NS, to_ns


def lexical_codes(tickers) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes whose order is the tickers' text order, and the sorted names."""
    cat = pd.Categorical(tickers)
    names = np.asarray(cat.categories, dtype=object)
    order = np.argsort(names.astype(str), kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[cat.codes], names[order]


def ticker_bounds(tickers: np.ndarray) -> dict[str, tuple[int, int]]:
    """``{ticker: (lo, hi)}`` slices of an array sorted by ticker."""
    tickers = np.asarray(tickers, dtype=object).astype(str)
    if len(tickers) == 0:
        return {}
    starts = np.flatnonzero(np.r_[True, tickers[1:] != tickers[:-1]])
    ends = np.r_[starts[1:], len(tickers)]
    return {tickers[s]: (int(s), int(e)) for s, e in zip(starts, ends, strict=True)}


def search_by_ticker(
    bounds: dict[str, tuple[int, int]],
    keys: np.ndarray,
    tickers: np.ndarray,
    instants: np.ndarray,
    *,
    side: str,
    packed=False,
) -> np.ndarray:
    """``searchsorted`` of each query within its ticker's sorted slice of ``keys``.

    Returns indices into ``keys``; a ticker with no rows gets 0, and ``lo == hi`` marks an
    empty slice for the caller. When the slices tile ``keys`` and (slice number, offset from
    the smallest key) packs into 63 bits, this is one ``searchsorted`` over packed keys;
    otherwise one call per distinct ticker (never per query).
    """
    instants = np.asarray(instants, dtype=np.int64)
    out = np.zeros(len(instants), dtype=np.int64)
    if len(instants) == 0 or not bounds:
        return out
    if packed is False:  # not given: pack now (callers searching often pass it in)
        packed = packed_keys(bounds, np.asarray(keys, dtype=np.int64))
    if packed is None:
        return _search_per_ticker(bounds, keys, tickers, instants, side=side, out=out)
    names, _, _, _, prepared = packed
    return _search_packed(packed, index_of(names, tickers, prepared=prepared), instants,
                          side=side)


def _search_packed(packed, code: np.ndarray, instants: np.ndarray, *, side: str) -> np.ndarray:
    """The one packed search: each instant within the slice numbered ``code`` (-1: none, 0
    returned) of the packed keys, as an index into the flat arrays."""
    _, shift, base, packed_keys, _ = packed
    out = np.zeros(len(instants), dtype=np.int64)
    known = code >= 0
    offset = np.clip(instants[known], base - 1, base + (1 << shift) - 1) - base
    out[known] = np.searchsorted(packed_keys, (code[known] << shift) + offset, side=side)
    return out


def index_of(names, values, *, prepared=None) -> np.ndarray:
    """Position of each value in ``names`` (unique strings), -1 when absent; one numpy
    ``searchsorted`` on text (pandas would re-infer an Arrow string index on every call).
    ``prepared`` is :func:`name_index` of ``names``, for callers that ask often."""
    sorted_names, order = prepared if prepared is not None else name_index(names)
    values = np.asarray(values)
    if values.dtype.kind != "U":
        values = values.astype(object).astype(str)
    if len(sorted_names) == 0:
        return np.full(len(values), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(sorted_names, values), len(sorted_names) - 1)
    return np.where(sorted_names[at] == values, order[at], -1).astype(np.int64)


def name_index(names) -> tuple[np.ndarray, np.ndarray]:
    """(names sorted as text, their original positions), for :func:`index_of`."""
    names = np.asarray(names, dtype=str)
    order = np.argsort(names, kind="stable")
    return names[order], order


def packed_keys(bounds: dict[str, tuple[int, int]], keys: np.ndarray):
    """(names in slice order, shift, base, packed keys, their name index) or None when they
    do not fit: :func:`search_by_ticker`'s ``packed``, for a caller searching the same keys
    more than once."""
    items = sorted(bounds.items(), key=lambda kv: kv[1][0])
    lengths = np.array([hi - lo for _, (lo, hi) in items], dtype=np.int64)
    starts = np.array([lo for _, (lo, _) in items], dtype=np.int64)
    if lengths.sum() != len(keys) or (starts != np.r_[0, np.cumsum(lengths)[:-1]]).any():
        return None  # slices do not tile the array
    packed = _pack_slices(starts, keys)
    if packed is None:
        return None
    shift, base, packed_keys = packed
    names = [name for name, _ in items]
    return names, shift, base, packed_keys, name_index(names)


def _pack_slices(starts: np.ndarray, ts: np.ndarray):
    """(shift, base, keys) with ``keys = slice number << shift | (ts - base)`` per row, or
    None when they do not fit in 63 bits (or there are no rows). The slices start at
    ``starts`` (the first at 0) and tile ``ts``."""
    if len(ts) == 0:
        return None
    base = int(ts.min())
    shift = (int(ts.max()) - base + 1).bit_length()
    if shift + len(starts).bit_length() > 62:
        return None
    keys = np.zeros(len(ts), dtype=np.int64)  # slice number << shift, built in place
    keys[starts[1:]] = 1 << shift
    np.cumsum(keys, out=keys)
    keys -= base
    keys += ts
    return shift, base, keys


def _search_per_ticker(bounds, keys, tickers, instants, *, side, out):
    codes, uniques = pd.factorize(np.asarray(tickers, dtype=object))
    order = np.argsort(codes, kind="stable")
    cuts = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
    for j, ticker in enumerate(uniques):
        rows = order[cuts[j]:cuts[j + 1]]
        lo, hi = bounds.get(ticker, (0, 0))
        out[rows] = lo + np.searchsorted(keys[lo:hi], instants[rows], side=side)
    return out


def lows_of(bounds: dict[str, tuple[int, int]], tickers: np.ndarray) -> np.ndarray:
    """First index of each query's ticker slice (0 for an unknown ticker)."""
    if not bounds:
        return np.zeros(len(tickers), dtype=np.int64)
    names = list(bounds)
    lo = np.array([bounds[t][0] for t in names] + [0], dtype=np.int64)
    return lo[index_of(names, tickers)]


@dataclass(frozen=True)
class BarArrays:
    """Bars of many tickers as flat arrays sorted by (ticker, ts).

    ``bounds[ticker] = (lo, hi)`` is the slice of that ticker; ``avail = ts + bar length`` is
    when a bar becomes known (docs/spec.md §2).
    """

    ts: np.ndarray
    avail: np.ndarray
    open: np.ndarray
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    volume: np.ndarray
    bounds: dict[str, tuple[int, int]]
    bar_ns: int
    _packed: dict = field(default_factory=dict, repr=False, compare=False)  # packed keys by "on"

    @classmethod
    def from_frame(cls, bars: pd.DataFrame, *, bar_seconds: int) -> BarArrays:
        """Build from a frame sorted by ticker then ts (as the store returns it)."""
        codes, names = lexical_codes(bars["ticker"])
        empty = np.full(len(bars), np.nan)
        return cls.from_columns(
            codes=codes, names=names, ts=to_ns(bars["ts"]), bar_seconds=bar_seconds,
            **{c: bars[c].to_numpy(float) if c in bars else empty
               for c in ("open", "high", "low", "close", "volume")},
        )

    @classmethod
    def from_columns(cls, *, codes: np.ndarray, names: np.ndarray, ts: np.ndarray,
                     bar_seconds: int, **columns: np.ndarray) -> BarArrays:
        """Build from numpy columns already sorted by (code, ts); ``names[code]`` is the ticker
        and codes follow the tickers' text order."""
        codes = np.asarray(codes, dtype=np.int64)
        starts = (np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if len(codes)
                  else np.empty(0, np.int64))
        return cls.from_runs(starts=starts, names=np.asarray(names, dtype=object)[codes[starts]],
                             ts=ts, bar_seconds=bar_seconds, **columns)

    @classmethod
    def from_runs(cls, *, starts: np.ndarray, names, ts: np.ndarray, bar_seconds: int,
                  **columns: np.ndarray) -> BarArrays:
        """Build from numpy columns already sorted by (ticker, ts), given as runs: the ticker
        ``names[k]`` holds the rows from ``starts[k]`` to the next start. The packed search
        keys are built here; the names' being strictly increasing as text and the keys'
        being strictly increasing are the sort check."""
        ts = np.asarray(ts, dtype=np.int64)
        n = len(ts)
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.r_[starts[1:], n].astype(np.int64)[:len(starts)]
        slice_names = np.asarray(names, dtype=object).astype(str)
        packed = _pack_slices(starts, ts)
        if packed is None:
            run = np.repeat(np.arange(len(starts)), ends - starts)
            unsorted = n > 1 and bool((np.diff(ts)[run[1:] == run[:-1]] <= 0).any())
        else:
            unsorted = n > 1 and not bool((packed[2][1:] > packed[2][:-1]).all())
        if unsorted or (slice_names[1:] <= slice_names[:-1]).any():
            raise ValueError("bars must be sorted by ticker then ts, one bar per (ticker, ts)")
        bounds = dict(zip(slice_names.tolist(), zip(starts.tolist(), ends.tolist(),
                                                    strict=True), strict=True))
        bar_ns = int(bar_seconds) * NS
        out = cls(ts=ts, avail=ts + bar_ns, bounds=bounds, bar_ns=bar_ns,
                  **{k: np.asarray(v, dtype=float) for k, v in columns.items()})
        prepared = name_index(slice_names)
        out._packed["slices"] = (prepared, np.r_[starts, 0].astype(np.int64))
        if packed is not None:  # the same keys serve ts and avail (avail = ts + bar length)
            shift, base, keys = packed
            listed = slice_names.tolist()
            out._packed["ts"] = (listed, shift, base, keys, prepared)
            out._packed["avail"] = (listed, shift, base + bar_ns, keys, prepared)
        return out

    def mid_at(self, idx: np.ndarray) -> np.ndarray:
        """Mid of the bars at ``idx``; NaN where ``idx`` is -1 (no bar)."""
        if not len(self.high):
            return np.full(len(idx), np.nan)
        at = np.maximum(idx, 0)
        return np.where(idx >= 0, (self.high[at] + self.low[at]) / 2.0, np.nan)

    def slices_of(self, tickers: np.ndarray) -> np.ndarray:
        """Slice number of each ticker (slices in array order), -1 for a ticker without bars.
        Callers asking several questions about the same tickers compute it once and pass it
        as ``slices``."""
        if "slices" not in self._packed:
            items = sorted(self.bounds.items(), key=lambda kv: kv[1][0])
            names = [name for name, _ in items]
            starts = np.array([lo for _, (lo, _) in items] + [0], dtype=np.int64)
            self._packed["slices"] = (name_index(names), starts)
        prepared, _ = self._packed["slices"]
        if not len(prepared[0]):
            return np.full(len(tickers), -1, dtype=np.int64)
        return index_of(None, tickers, prepared=prepared)

    def search(self, tickers: np.ndarray, instants: np.ndarray, *, on: str, side: str,
               slices: np.ndarray | None = None) -> np.ndarray:
        """Global ``searchsorted`` of each instant within its ticker's slice of ``ts``/``avail``.

        Returns, per query, the insertion index into the flat arrays (``lo`` of the ticker for
        an instant before its first bar; ``0`` for a ticker without bars). ``slices``:
        :meth:`slices_of` the tickers, when known.
        """
        keys = self.ts if on == "ts" else self.avail
        if on not in self._packed:
            self._packed[on] = packed_keys(self.bounds, keys)
        packed = self._packed[on]
        if packed is None or slices is None:
            return search_by_ticker(self.bounds, keys, tickers, instants, side=side,
                                    packed=packed)
        return _search_packed(packed, slices, np.asarray(instants, dtype=np.int64), side=side)

    def count_between(self, tickers: np.ndarray, start: np.ndarray, stop: np.ndarray, *,
                      slices: np.ndarray | None = None) -> np.ndarray:
        """How many bars of each ticker start in ``[start, stop)`` (0 for a ticker without
        bars)."""
        if not len(self.ts):
            return np.zeros(len(tickers), np.int64)
        if slices is None and self.bounds:
            slices = self.slices_of(tickers)
        hi = self.search(tickers, stop, on="ts", side="left", slices=slices)
        lo = self.search(tickers, start, on="ts", side="left", slices=slices)
        return np.maximum(hi - lo, 0)

    def last_available(
        self, tickers: np.ndarray, instants: np.ndarray, *, not_before: np.ndarray | None = None,
        slices: np.ndarray | None = None,
    ) -> np.ndarray:
        """Index of the last bar of each ticker available at or before each instant, else -1.

        With ``not_before``, a bar whose availability is earlier than it does not count.
        ``slices``: :meth:`slices_of` the tickers, when known (saves the text look-up).
        """
        if slices is None and self.bounds:
            slices = self.slices_of(tickers)
        end = self.search(tickers, instants, on="avail", side="right", slices=slices)
        lows = (np.zeros(len(end), dtype=np.int64) if slices is None
                else np.where(slices >= 0, self._packed["slices"][1][slices], 0))
        idx = end - 1
        ok = idx >= lows
        if not_before is not None and len(self.avail):
            ok &= self.avail[np.clip(idx, 0, None)] >= not_before
        return np.where(ok, idx, -1)
