"""A store laid out by ticker (docs/spec.md §2, "A store laid out by ticker"): a read-only
copy of a store whose bars lie in a file per ticker and calendar quarter, so a run over a few
of many tickers reads those tickers' files alone (a date partition holds every ticker's bars,
and pyarrow skips no less than a row group, which most slices touch).

A file ``bars/ticker=<T>/quarter=YYYYQn/part.parquet`` (``T`` percent-encoded) holds the
ticker's bars of the quarter's local dates, with their ``date`` (the local date of the bar
start in the store's zone, the date partition it came from), in (date, ts) order, which is
the order a read of the date partitions lays one ticker's bars end to end in, in any zone.
It is one row group, whose ``date`` statistics a read of a range of dates skips by.
Headline partitions are copied as they are. The manifest says ``layout: "ticker"`` and
lists ``bar_dates``, the local dates holding bars (what the date partitions' names said);
the copy is never changed (ingest, fetch and live refuse it): change the store it was
copied from, and copy it again.
"""

from __future__ import annotations

import datetime as dt
import glob
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote, unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from finbench.core.errors import StoreError
from finbench.core.folder_lock import LOCK_FILE, FolderLock
from finbench.core.location import is_uri, read_bytes
from finbench.core.outputs import write_json, writing
from finbench.core.progress import Countdown
from finbench.data.schema import BARS_SCHEMA

LAYOUT = "ticker"  # the manifest's ``layout`` of such a store (a store without one: "date")
FILE_SCHEMA = BARS_SCHEMA.append(pa.field("date", pa.date32()))
# How a ticker file is written, for reading speed: the times of one ticker's bars are
# distinct and evenly spaced, so stored as differences they take half the bytes and a third
# of the time to read that a dictionary of them does; LZ4 decodes the prices of a quarter
# about twice as fast as zstd does, in twice the bytes.
ENCODING = {"compression": "lz4", "use_dictionary": ["ticker", "date"],
            "column_encoding": {"ts": "DELTA_BINARY_PACKED"}}
_FILE = re.compile(r"bars/ticker=([^/]+)/quarter=(\d{4})Q([1-4])/part\.parquet")
_ANY_TICKER_FILE = re.compile(r"bars/ticker=[^/]*/[^/]*/[^/]*\.parquet")


def file_of(ticker: str, day: dt.date) -> str:
    """The file of ``ticker``'s bars of the quarter holding ``day``."""
    return f"bars/ticker={quote(ticker, safe='')}/quarter={day.year}Q{(day.month - 1) // 3 + 1}" \
           "/part.parquet"


def quarter_dates(year: int, quarter: int) -> tuple[dt.date, dt.date]:
    """The first and last date of a calendar quarter."""
    first = dt.date(year, 3 * quarter - 2, 1)
    following = dt.date(year + (quarter == 4), 1 if quarter == 4 else 3 * quarter + 1, 1)
    return first, following - dt.timedelta(days=1)


def parse_file(rel: str) -> tuple[str, dt.date, dt.date] | None:
    """(ticker, first date, last date of its quarter) of a file's path; None for a path that
    is no ticker file as :func:`file_of` writes it."""
    match = _FILE.fullmatch(rel)
    if match is None:
        return None
    ticker = unquote(match.group(1))
    if quote(ticker, safe="") != match.group(1):  # one path per ticker: no other spelling
        return None
    return ticker, *quarter_dates(int(match.group(2)), int(match.group(3)))


def ticker_files(partitions: Iterable[str]) -> dict[str, list[tuple[dt.date, dt.date, str]]]:
    """Each ticker's files among a manifest's ``partitions``, as (first date, last date,
    path) in date order; tickers in sorted order."""
    files: dict[str, list] = {}
    for rel in partitions:
        parsed = parse_file(rel)
        if parsed is not None:
            files.setdefault(parsed[0], []).append((parsed[1], parsed[2], rel))
    return {t: sorted(files[t]) for t in sorted(files)}


# -- reading ---------------------------------------------------------------------------------
def read_tickers(store, tickers: Iterable[str] | None, start: dt.date | None,
                 end: dt.date | None, columns: Iterable[str]) -> list[tuple[str, pa.Table]]:
    """(ticker, its bars of local dates ``[start, end]``: ``ts`` and ``columns``, in (date,
    ts) order) of each of ``tickers`` (None: all) holding bars then, in ticker order. Only
    the row groups whose dates meet the range are read (a group's date statistics, which
    ``verify`` checks)."""
    index = store.ticker_files
    names = list(index) if tickers is None else sorted(set(tickers) & index.keys())
    found = []
    for name in names:
        pieces = []
        for first, last, rel in index[name]:
            if (start is not None and last < start) or (end is not None and first > end):
                continue
            with store.reading(rel):
                source, fs = store._source(rel)
                with pq.ParquetFile(source, filesystem=fs) as file:
                    groups, inside = _groups_meeting(file.metadata, start, end)
                    if not groups:
                        continue
                    table = file.read_row_groups(  # the dates, only to filter by
                        groups, columns=["ts", *columns, *([] if inside else ["date"])],
                        use_threads=False)
            if not inside:  # some group's dates reach past the range: its rows, filtered
                date = table.column("date")
                keep = None
                if start is not None:
                    keep = pc.greater_equal(date, pa.scalar(start, pa.date32()))
                if end is not None:
                    below = pc.less_equal(date, pa.scalar(end, pa.date32()))
                    keep = below if keep is None else pc.and_(keep, below)
                table = table.filter(keep).drop_columns(["date"])
            pieces.append(table)
        if pieces:
            table = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
            if table.num_rows:
                found.append((name, table))
    return found


def _groups_meeting(meta: pq.FileMetaData, start: dt.date | None, end: dt.date | None
                    ) -> tuple[list[int], bool]:
    """(row groups whose dates meet ``[start, end]``, whether each lies inside it)."""
    column = meta.schema.names.index("date")
    groups, inside = [], True
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(column).statistics
        if stats is None or not stats.has_min_max:  # (a file this module wrote has them)
            groups.append(i)
            inside = inside and start is None and end is None
            continue
        lo, hi = stats.min, stats.max
        if (start is not None and hi < start) or (end is not None and lo > end):
            continue
        groups.append(i)
        inside = inside and (start is None or lo >= start) and (end is None or hi <= end)
    return groups, inside


def day_table(store, day: dt.date, columns: tuple[str, ...], *,
              tickers: Iterable[str] | None = None) -> pa.Table | None:
    """The bars of local date ``day`` of ``tickers`` (None: every ticker) laid out as its
    date partition would be read (``ticker`` dictionary-encoded, then ``ts`` and
    ``columns``, in (ticker, ts) order); None when none has bars that day."""
    parts = read_tickers(store, tickers, day, day, columns)
    if not parts:
        return None
    lengths = np.array([t.num_rows for _, t in parts], np.int64)
    ticker = pa.DictionaryArray.from_arrays(
        pa.array(np.repeat(np.arange(len(parts), dtype=np.int32), lengths)),
        pa.array([name for name, _ in parts], pa.string()))
    table = pa.concat_tables([t for _, t in parts])
    return table.add_column(0, "ticker", pa.chunked_array([ticker]))


# -- copying ---------------------------------------------------------------------------------
def copy_by_ticker(source: str | Path, out: str | Path, *, echo=None):
    """Copy the store at ``source`` (laid out by date) to a new store at ``out`` laid out by
    ticker; returns it. The copy is written under a temporary name beside ``out`` and
    renamed when whole: on an error nothing is left at ``out``; the folders of copies to
    ``out`` that were killed are removed first. ``echo``: progress."""
    from finbench.data.store import Store

    if is_uri(out):
        raise StoreError(f"{out}: stores are written on a local disk; write the copy there, "
                         "then upload it with `finbench data copy LOCAL_STORE URI`")
    store = Store(source)
    if store.layout != "date":
        raise StoreError(f"{source}: is laid out by ticker already (copy it as it is with "
                         "`finbench data copy`)")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise StoreError(f"{out}: exists and is not an empty folder; the copy makes a new "
                         "store")
    days = store.dates("bars")
    quarters: dict[tuple[int, int], list[dt.date]] = {}
    for day in days:
        quarters.setdefault((day.year, (day.month - 1) // 3 + 1), []).append(day)
    out.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(out, echo)
    tmp = out.parent / f"{_COPYING.format(name=out.name)}{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    with _CopyLock(tmp, command=f"finbench data copy {source} {out}"):  # (makes the folder)
        _copy(store, source, out, tmp, days, quarters, echo)
    return Store(out)


_COPYING = ".{name}.copying-"  # a copy's folder while it is written: this and its process id


class _CopyLock(FolderLock):
    """The lock a copy holds on its temporary folder while it writes it: a folder whose lock
    can be taken was left by a copy that was killed (:func:`_remove_abandoned`)."""

    what = "copy's temporary folder"
    error = StoreError


def _remove_abandoned(out: Path, echo) -> None:
    """Remove the temporary folders beside ``out`` of copies to it that were killed (``kill
    -9``, a lost machine): those whose lock no process holds. A copy still writing holds
    its lock, and its folder is left as it is."""
    for old in sorted(out.parent.glob(glob.escape(_COPYING.format(name=out.name)) + "*")):
        if not old.is_dir():
            continue
        try:
            with _CopyLock(old, command="finbench data copy (removing a killed copy's files)"):
                shutil.rmtree(old)
        except StoreError:  # a copy still writing it
            continue
        if echo is not None:
            echo(f"copy: removed {old}, left by a copy that was stopped")


def _copy(store, source, out: Path, tmp: Path, days: list[dt.date],
          quarters: dict[tuple[int, int], list[dt.date]], echo) -> None:
    """Lay out ``store``'s bars by ticker in ``tmp``, with its headlines and a manifest, then
    rename ``tmp`` to ``out``; on an error, ``tmp`` is removed."""
    from finbench.data.store import MANIFEST, sha256_file, snapshot_hash

    progress = Countdown("copy", len(quarters), echo, unit="quarters of bars laid out by ticker")
    partitions: dict[str, str] = {}
    folded: dict[str, str] = {}  # each ticker's folder name in lower case: the ticker
    try:
        for quarter_days in quarters.values():
            for name, table in _quarter_by_ticker(store, quarter_days):
                rel = file_of(name, quarter_days[0])
                other = folded.setdefault(rel.split("/")[1].casefold(), name)
                if other != name:
                    raise StoreError(
                        f"{source}: tickers {other!r} and {name!r} differ only in case; their "
                        "files would be one on a disk that ignores case (macOS, Windows), so "
                        "this store cannot be laid out by ticker")
                _write_file(tmp / rel, table)
                partitions[rel] = sha256_file(tmp / rel)
            progress.add()
        for rel in store.manifest["partitions"]:
            if rel.startswith("headlines/"):
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                with store.reading(rel), writing(tmp / rel):
                    (tmp / rel).write_bytes(read_bytes(store.fs, store._file(rel)))
                partitions[rel] = sha256_file(tmp / rel)
        manifest = {key: value for key, value in store.manifest.items()
                    if key not in ("partitions", "snapshot_sha256")}
        manifest.update(layout=LAYOUT, bar_dates=[d.isoformat() for d in days],
                        copy_of=store.snapshot_sha256,
                        partitions=dict(sorted(partitions.items())))
        manifest["snapshot_sha256"] = snapshot_hash(partitions, manifest)
        write_json(tmp / MANIFEST, manifest)
        store.check_unchanged()  # what was read is one version of the store
        if out.exists():
            out.rmdir()
        (tmp / LOCK_FILE).unlink()  # (held until the rename: the copy has no lock file)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _quarter_by_ticker(store, days: list[dt.date]) -> Iterator[tuple[str, pa.Table]]:
    """(ticker, its bars of ``days`` with their date, in (date, ts) order) per ticker, in
    ticker order: the date partitions read and their rows regrouped, a stable sort by ticker
    of the rows laid out date by date (each partition is in (ticker, ts) order). Tickers are
    kept as integer codes while the rows are regrouped (no text per row)."""
    tables, codes, code_of = [], [], {}
    for day in days:
        rel = f"bars/date={day.isoformat()}/part.parquet"
        with store.reading(rel):
            source, fs = store._source(rel)
            with pq.ParquetFile(source, read_dictionary=["ticker"], filesystem=fs) as file:
                table = file.read().combine_chunks()
        ticker = table.column("ticker").chunk(0)
        local = np.array([code_of.setdefault(name, len(code_of))
                          for name in ticker.dictionary.to_pylist()], np.int64)
        codes.append(local[ticker.indices.to_numpy(zero_copy_only=False)] if len(local)
                     else np.empty(0, np.int64))
        table = table.drop_columns(["ticker"]).select(BARS_SCHEMA.names[1:]).cast(
            pa.schema(list(BARS_SCHEMA)[1:]))
        tables.append(table.append_column(
            "date", pa.array(np.full(table.num_rows, np.datetime64(day, "D")), pa.date32())))
    names = sorted(code_of)
    rank = np.empty(len(names), np.int64)
    rank[[code_of[name] for name in names]] = np.arange(len(names))
    codes = rank[np.concatenate(codes)] if codes else np.empty(0, np.int64)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    del codes
    columns = {}  # each column regrouped in turn, its partitions' pieces let go
    for name in FILE_SCHEMA.names[1:]:
        pieces = [t.column(name).chunk(0) if t.column(name).num_chunks == 1
                  else t.column(name).combine_chunks() for t in tables]
        kind = FILE_SCHEMA.field(name).type
        raw = [(a.cast(pa.int64()) if name == "ts" else a.cast(pa.int32()) if name == "date"
                else a).to_numpy(zero_copy_only=False) for a in pieces]
        columns[name] = (np.concatenate(raw) if raw else np.empty(0))[order]
        del pieces, raw
        columns[name] = (kind, columns[name])
    del tables
    for i, name in enumerate(names):  # one ticker's text column at a time
        a, b = bounds[i], bounds[i + 1]
        arrays = [pa.array(np.full(b - a, name, dtype=object), pa.string())]
        for column, (kind, values) in columns.items():
            piece = pa.array(values[a:b])
            arrays.append(piece.cast(kind) if column in ("ts", "date") else piece)
        yield name, pa.Table.from_arrays(arrays, schema=FILE_SCHEMA)


def _write_file(path: Path, table: pa.Table) -> None:
    """One ticker's quarter, one row group (a row group per month was a fifth slower to read
    whole, as the label pass reads: each column chunk costs a read of its own)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with writing(path):
        pq.write_table(table, path, write_statistics=True, row_group_size=max(1, len(table)),
                       **ENCODING)


# -- checking --------------------------------------------------------------------------------
def verify_by_ticker(store, *, echo=None) -> list[str]:
    """The problems of a store laid out by ticker, in the order :meth:`Store.verify` gives
    them: files unlisted or missing, hashes, the snapshot's, then each file's rules (the
    ingest's, its ticker, its quarter, each bar's date, (date, ts) order, each row group's
    date statistics) and the manifest's ``bar_dates`` against the dates the files hold."""
    from finbench.data.store import CHECKERS, DATE_FILE, MANIFEST

    problems, on_disk = store.listing_problems(DATE_FILE, _ANY_TICKER_FILE)
    listed = set(store.manifest["partitions"])
    for rel in sorted(listed):
        if rel.startswith("bars/") and parse_file(rel) is None:
            problems.append(f"{rel}: not a file of a store laid out by ticker "
                            "(bars/ticker=<ticker, percent-encoded>/quarter=YYYYQn/part.parquet)")
    rels = sorted(listed & on_disk)
    progress = Countdown("store", len(rels), echo, unit="files hashed and checked")
    hash_problems, rule_problems, dates = [], [], set()
    with ThreadPoolExecutor(max_workers=CHECKERS) as pool:
        for wrong, broken, held in pool.map(lambda rel: _check_file(store, rel), rels):
            hash_problems += wrong
            rule_problems += broken
            dates |= held
            progress.add()
    if store.manifest.get("snapshot_sha256") != store.snapshot_sha256:
        hash_problems.append(f"{MANIFEST}: snapshot_sha256 does not match its settings and "
                             "partitions")
    stated = set(store.manifest["bar_dates"])
    if stated != dates and not any(p.startswith("bars/") for p in problems + hash_problems):
        extra, absent = sorted(stated - dates), sorted(dates - stated)
        rule_problems.append(
            f"{MANIFEST}: bar_dates differs from the dates the files hold ("
            + "; ".join(text for text in (
                f"listed, no bars: {', '.join(extra[:3])}" if extra else "",
                f"bars, not listed: {', '.join(absent[:3])}" if absent else "") if text) + ")")
    return problems + hash_problems + rule_problems


def _check_file(store, rel: str) -> tuple[list[str], list[str], set[str]]:
    """(hash problem, rule problems, local dates held as ISO texts) of one listed file."""
    import hashlib

    data = read_bytes(store.fs, store._file(rel))
    if hashlib.sha256(data).hexdigest() != store.manifest["partitions"][rel]:
        return [f"{rel}: content hash does not match the manifest"], [], set()
    parsed = parse_file(rel)
    if parsed is None:
        return [], [], set()
    try:
        file = pq.ParquetFile(pa.BufferReader(data))
        table = file.read()
    except (pa.ArrowInvalid, OSError) as exc:
        return [], [f"{rel}: not a readable Parquet file ({exc})"], set()
    problems = file_problems(table, file.metadata, rel, *parsed, timezone=store.timezone,
                             bar_seconds=store.bar_seconds)
    dates = table.column("date") if "date" in table.column_names else pa.array([])
    return [], problems, {d.isoformat() for d in pc.unique(dates).to_pylist() if d is not None}


def file_problems(table: pa.Table, meta: pq.FileMetaData, rel: str, ticker: str,
                  first: dt.date, last: dt.date, *, timezone: str, bar_seconds: int
                  ) -> list[str]:
    """The rules a ticker file keeps (of ``ticker``'s quarter ``[first, last]``): decided on
    its Arrow columns when it keeps them all (:func:`_keeps_rules`), else found and worded
    by the full check below."""
    from finbench.data.partition_checks import _layout_problems, _off_date, _rule_problems

    if not table.schema.remove_metadata().equals(FILE_SCHEMA):
        return [f"{rel}: columns are not those of a ticker file ({FILE_SCHEMA.names}, "
                f"typed as the store's bars and date a date; found {table.schema.names})"]
    if _keeps_rules(table, meta, rel, ticker, first, last, timezone=timezone,
                    bar_seconds=bar_seconds):
        return []
    frame = table.drop_columns(["date"]).to_pandas()
    problems = _rule_problems(frame, rel, bar_seconds) + _layout_problems(frame, rel)
    date = table.column("date")
    if date.null_count:
        problems.append(f"{rel}: row {_first(pc.is_null(date))}: date is empty")
        return problems
    days = date.to_numpy().astype("datetime64[D]")
    other = np.flatnonzero(frame["ticker"].to_numpy(object) != ticker)
    if len(other):
        problems.append(f"{rel}: row {other[0] + 1}: ticker {frame['ticker'].iloc[other[0]]!r} "
                        f"is not the file's ({ticker!r})")
    outside = np.flatnonzero((days < np.datetime64(first)) | (days > np.datetime64(last)))
    if len(outside):
        problems.append(f"{rel}: row {outside[0] + 1}: date {days[outside[0]]} is not in the "
                        f"file's quarter ({first} to {last})")
    off = _off_date(frame, days, timezone)
    if len(off):
        problems.append(f"{rel}: row {off[0] + 1}: the bar at {frame['ts'].iloc[off[0]]} does "
                        f"not start on its date {days[off[0]]} in {timezone}")
    ts = frame["ts"].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    step = (np.diff(days.astype(np.int64)) > 0) | (
        (np.diff(days.astype(np.int64)) == 0) & (np.diff(ts) > 0))
    if not step.all():
        problems.append(f"{rel}: row {np.flatnonzero(~step)[0] + 2}: not after the row before "
                        "in (date, ts) order")
    for i, held in _misstated_groups(meta, days):
        problems.append(f"{rel}: row group {i}: its date statistics are not its dates' "
                        f"least and greatest ({held.min()}, {held.max()}): a read of a "
                        "range of dates would skip or take it wrongly")
    return problems


def _misstated_groups(meta: pq.FileMetaData, days: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(row group, its dates) of each group whose ``date`` statistics are missing or are
    not its dates' least and greatest (``days``: the file's dates, row by row)."""
    column = meta.schema.names.index("date")
    offset = 0
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        held = days[offset:offset + group.num_rows]
        offset += group.num_rows
        stats = group.column(column).statistics
        if len(held) and (stats is None or not stats.has_min_max
                          or np.datetime64(stats.min) != held.min()
                          or np.datetime64(stats.max) != held.max()):
            yield i, held


def _keeps_rules(table: pa.Table, meta: pq.FileMetaData, rel: str, ticker: str,
                 first: dt.date, last: dt.date, *, timezone: str, bar_seconds: int) -> bool:
    """Whether a ticker file (of :data:`FILE_SCHEMA`) keeps every rule of
    :func:`file_problems`, decided with no frame made: its bars, cut at each change of date,
    are checked as the date partitions they came from would be
    (:func:`~finbench.data.partition_checks._clean`: the ingest's rules, each piece in strict
    ts order, each bar on its piece's date), and the rest here: one ticker, dates in the
    quarter and non-decreasing, each row group's date statistics. False sends the file to
    the full check, which words what it breaks."""
    from finbench.data.partition_checks import _clean

    date = table.column("date")
    if not table.num_rows or date.null_count or pc.count_distinct(table.column("ticker")).as_py() != 1:
        return False
    if table.column("ticker")[0].as_py() != ticker:
        return False
    days = date.to_numpy().astype("datetime64[D]")
    if days[0] < np.datetime64(first) or days[-1] > np.datetime64(last) or (
            np.diff(days.astype(np.int64)) < 0).any():
        return False
    if next(_misstated_groups(meta, days), None) is not None:
        return False
    cuts = np.flatnonzero(np.r_[True, days[1:] != days[:-1], True])
    bars = table.drop_columns(["date"])
    return _clean([(days[a].astype(dt.date), rel, bars.slice(a, b - a))
                   for a, b in zip(cuts[:-1], cuts[1:], strict=True)],
                  timezone=timezone, bar_seconds=bar_seconds)


def _first(mask: pa.ChunkedArray | pa.Array) -> int:
    """The first true row of ``mask``, counted from 1."""
    return int(np.flatnonzero(np.asarray(mask.to_numpy(zero_copy_only=False), bool))[0]) + 1
