"""The Parquet store: bars and headlines partitioned by local date, content-hashed (docs/spec.md §2)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from finbench.core.errors import StoreError
from finbench.core.location import files_under, filesystem, is_file, is_uri, join, read_bytes
from finbench.core.names import bar_length_problem, is_timezone
from finbench.core.outputs import write_json, writing
from finbench.core.progress import Countdown
from finbench.data.bars import lexical_codes
from finbench.data.commit import COMMIT, change_lock, commit, finish_unless_busy, store_lock
from finbench.data.schema import BARS_SCHEMA, HEADLINES_SCHEMA

STORE_FORMAT = "finbench-store"
STORE_VERSION = 1
DEFAULT_ZONE = "America/New_York"  # the zone of a new store's date partitions
MANIFEST = "manifest.json"
TABLES = {"bars": BARS_SCHEMA, "headlines": HEADLINES_SCHEMA}
ROW_GROUP_ROWS = 128 * 1024
NS_UTC = pa.timestamp("ns", tz="UTC")  # bar instants as int64 ns, whatever unit a file uses
CHECKERS = min(4, os.cpu_count() or 1)  # threads hashing and checking partitions in verify
REMOTE_READERS = 8  # partitions fetched at once from object storage (each read mostly waits)
DATE_FILE = re.compile(r"[^./][^/]*/date=[^/]*/[^/]*\.parquet")  # a date partition's path
CHECK_CHUNK = 32  # most consecutive bar partitions a checker takes at once (small ones are
# checked together: finbench.data.partition_checks)


def sha256_file(path: Path, filesystem=None) -> str:
    """SHA-256 of a file's bytes (``filesystem``: a pyarrow filesystem it is on; default the
    local disk)."""
    digest = hashlib.sha256()
    with (open(path, "rb") if filesystem is None else filesystem.open_input_stream(path)) as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


MEANING = ("bar_seconds", "bar_timestamp", "timezone")  # settings that change what data mean


def snapshot_hash(partitions: dict[str, str], settings: dict) -> str:
    """One hash for a whole store: SHA-256 over the settings that give its data their meaning
    (bar length, timestamp convention, zone of its date partitions) and its sorted
    ``path sha`` lines. Editing a setting changes the snapshot as editing a partition does."""
    text = "finbench-store-snapshot-v2\n" + "".join(
        f"{key}={settings[key]}\n" for key in MEANING) + "".join(
        f"{path} {sha}\n" for path, sha in sorted(partitions.items()))
    return hashlib.sha256(text.encode()).hexdigest()


@contextmanager
def read_guard(file, root, *, what: str, may_pass_again: bool = False):
    """A read of a store's ``file`` (a store at ``root``) that fails (a damaged or missing
    file, storage that does not answer) is a StoreError naming it, with the reader's own
    message and the command that lists every ``what`` differing from the store's manifest."""
    try:
        yield
    except (pa.ArrowInvalid, OSError) as exc:
        error = StoreError(
            f"{file}: cannot be read ({exc}); `finbench data validate {root}` names every "
            f"{what} that differs from the store's manifest (restore one from where it came: "
            "ingest it again, or `finbench data copy`)")
        error.may_pass_again = may_pass_again
        raise error from None


def manifest_object(data: bytes | str, where: str) -> dict:
    """A store's manifest read from its bytes; a StoreError naming ``where`` when it is not
    a JSON object (damaged, or not a manifest)."""
    try:
        manifest = json.loads(data)
    except ValueError as exc:  # JSONDecodeError, or bytes that are no text
        raise StoreError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise StoreError(f"{where}: not a store manifest (a JSON {type(manifest).__name__}, "
                         "not an object)")
    return manifest


def check_fields(manifest: dict, where: str, fields: dict[str, type], files: str) -> None:
    """A StoreError naming ``where`` when one of ``fields`` (name: JSON kind) is of another
    kind, or ``files`` does not map file names to hashes (the manifest was edited or
    damaged: what reads it would fail further on, less clearly)."""
    for name, kind in fields.items():
        value = manifest.get(name)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise StoreError(f"{where}: {name} is {value!r}, not {_KINDS[kind]}: the manifest "
                             "was changed or damaged")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in manifest[files].items()):
        raise StoreError(f"{where}: {files} does not map each file to its SHA-256: the "
                         "manifest was changed or damaged")


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_KINDS = {str: "a text", int: "a whole number", bool: "true or false", list: "a list",
          dict: "an object"}
STORE_FIELDS = {"format": str, "version": int, "synthetic": bool, "description": str,
                "bar_seconds": int, "bar_timestamp": str, "timezone": str, "sources": list,
                "partitions": dict, "snapshot_sha256": str}


def changed_while_read(path, changed: list[str], what: str) -> StoreError:
    """The error of a store changed by another process while this one read it: ``changed``,
    the ``what`` (partitions, files) it read that were replaced or removed (none: its
    settings changed)."""
    said = (f"{len(changed)} {what} read were replaced or removed "
            f"({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''})"
            if changed else "its settings changed")
    return StoreError(f"{path}: changed while it was read ({said}): what was read may mix two "
                      "versions of the store; change a store between runs, and run this again "
                      "(a run: into a new folder)")


class Store:
    """A directory of date-partitioned Parquet files with a manifest of their hashes.

    Layout: ``bars/date=YYYY-MM-DD/part.parquet`` (sorted by ticker then ts; the date is the
    local date of the bar start in the store's zone) and ``headlines/date=YYYY-MM-DD/part.parquet``
    (by local date of availability), plus ``manifest.json``.

    ``path`` may be a folder on object storage (``s3://bucket/store``,
    :mod:`finbench.core.location`): such a store is read in place, through pyarrow's
    filesystem, by runs, audits and ``verify``; stores are written (ingest, fetch, synth) on a
    local disk and uploaded whole (``finbench data copy``).
    """

    def __init__(self, path: str | Path) -> None:
        self._ahead = None  # a ReadAhead while one runs (read_ahead)
        self.remote = is_uri(path)
        self.path = str(path).rstrip("/") if self.remote else Path(path)
        self.fs, self.root = filesystem(path)
        if not self.remote and self.path.is_dir():  # a change a killed process left undone
            finish_unless_busy(self.path)
        self.manifest = self._load_manifest()
        self.partitions_read: set[str] = set()  # (:meth:`check_unchanged`)

    def check_unchanged(self) -> None:
        """A StoreError when a partition this object read (or began to read) is no longer
        the one its manifest listed when opened: another process changed the store while it
        was read, so what was read may mix two versions of the store under the first one's
        snapshot hash."""
        now = self._load_manifest()
        changed = sorted(rel for rel in self.partitions_read
                         if now["partitions"].get(rel) != self.manifest["partitions"].get(rel))
        if changed or any(now.get(k) != self.manifest.get(k) for k in MEANING):
            raise changed_while_read(self.path, changed, "partition(s)")

    def _load_manifest(self) -> dict:
        """The manifest as stored, checked."""
        manifest_path = f"{self.path}/{MANIFEST}"
        if not is_file(self.fs, join(self.root, MANIFEST)):
            raise StoreError(f"{self.path}: not a FinBench store (no {MANIFEST})")
        manifest = manifest_object(read_bytes(self.fs, join(self.root, MANIFEST)),
                                   manifest_path)
        if manifest.get("format") != STORE_FORMAT:
            raise StoreError(f"{manifest_path}: format is not {STORE_FORMAT!r}")
        if manifest.get("version") != STORE_VERSION:
            raise StoreError(
                f"{manifest_path}: version {manifest.get('version')!r} is not {STORE_VERSION}"
            )
        problem = bar_length_problem(manifest.get("bar_seconds"))
        if problem:
            raise StoreError(f"{manifest_path}: bar_seconds {problem}")
        if manifest.get("bar_timestamp") != "start":
            raise StoreError(f"{manifest_path}: bar_timestamp must be 'start' (bars are stored "
                             f"by their start), not {manifest.get('bar_timestamp')!r}")
        if not is_timezone(manifest.get("timezone")):
            raise StoreError(f"{manifest_path}: timezone {manifest.get('timezone')!r} is "
                             "not a time zone name (e.g. America/New_York)")
        check_fields(manifest, manifest_path, STORE_FIELDS, "partitions")
        layout = manifest.get("layout", "date")
        if layout not in ("date", "ticker"):
            raise StoreError(f"{manifest_path}: layout {layout!r} is not 'date' or 'ticker'")
        if layout == "ticker":
            dates = manifest.get("bar_dates")
            if not isinstance(dates, list) or not all(
                    isinstance(d, str) and _ISO_DATE.fullmatch(d) for d in dates):
                raise StoreError(f"{manifest_path}: bar_dates is not a list of dates "
                                 "(YYYY-MM-DD): the manifest was changed or damaged")
        return manifest

    @contextmanager
    def changing(self, command: str):
        """Hold the store's lock for a change (:mod:`finbench.data.commit`), with the
        manifest read again under it (another process may have changed the store since this
        one opened it): a change merges into what is stored, never into an older view."""
        self._writable()
        with change_lock(self.path, command):
            self.manifest = self._load_manifest()
            yield

    # -- creation -----------------------------------------------------------------------------
    @classmethod
    def open_or_create(
        cls,
        path: str | Path,
        *,
        bar_seconds: int = 60,
        timezone: str = DEFAULT_ZONE,
        synthetic: bool = False,
        description: str = "",
    ) -> Store:
        """Open the store at ``path``, creating an empty one with these settings if absent."""
        if is_uri(path):
            raise StoreError(f"{path}: stores are written on a local disk; write it there, then "
                             "upload it with `finbench data copy LOCAL_STORE URI`")
        path = Path(path)
        problem = bar_length_problem(bar_seconds)
        if problem:
            raise StoreError(f"bar length: {problem}")
        if not is_timezone(timezone):
            raise StoreError(f"timezone {timezone!r} is not a time zone name (e.g. "
                             "America/New_York)")
        if path.exists() and not path.is_dir():
            raise StoreError(f"{path}: is a file, not a store directory")
        if (path / MANIFEST).is_file():
            store = cls(path)
            if store.bar_seconds != bar_seconds:
                raise StoreError(
                    f"{path}: store holds {store.bar_seconds}-second bars, not {bar_seconds}"
                )
            return store
        if path.exists() and any(path.iterdir()):
            raise StoreError(f"{path}: exists, is not empty and is not a FinBench store")
        path.mkdir(parents=True, exist_ok=True)
        manifest = {
            "format": STORE_FORMAT,
            "version": STORE_VERSION,
            "synthetic": synthetic,
            "description": description,
            "bar_seconds": bar_seconds,
            "bar_timestamp": "start",
            "timezone": timezone,
            "sources": [],
            "partitions": {},
        }
        manifest["snapshot_sha256"] = snapshot_hash({}, manifest)
        write_json(path / MANIFEST, manifest)
        return cls(path)

    # -- properties -----------------------------------------------------------------------------
    @property
    def bar_seconds(self) -> int:
        return int(self.manifest["bar_seconds"])

    @property
    def timezone(self) -> str:
        return str(self.manifest["timezone"])

    @property
    def layout(self) -> str:
        """How the bars lie: ``"date"`` (a partition per local date, the store ingest and
        fetch write) or ``"ticker"`` (a file per ticker and quarter: a read-only copy,
        :mod:`finbench.data.by_ticker`)."""
        return str(self.manifest.get("layout", "date"))

    def partitioned_by_date_in(self, timezone: str) -> bool:
        """Whether each local date of ``timezone`` has its bars in one partition of their
        own, read as it lies (:meth:`read_day_table`): a store laid out by date in that zone."""
        return self.layout == "date" and self.timezone == timezone

    @cached_property
    def ticker_files(self) -> dict[str, list[tuple[dt.date, dt.date, str]]]:
        """A store laid out by ticker: each ticker's files, as (first date, last date, path)
        in date order (:func:`finbench.data.by_ticker.ticker_files`)."""
        from finbench.data.by_ticker import ticker_files

        return ticker_files(self.manifest["partitions"])

    @property
    def synthetic(self) -> bool:
        return bool(self.manifest.get("synthetic", False))

    @property
    def snapshot_sha256(self) -> str:
        """The store's identity, computed from its settings and partition hashes (the copy in
        the manifest is for reading; :meth:`verify` checks that it agrees)."""
        return snapshot_hash(self.manifest["partitions"], self.manifest)

    def dates(self, table: str) -> list[dt.date]:
        """Local dates that have a partition of ``table`` (a store laid out by ticker: its
        bars' dates, as its manifest lists them)."""
        if table == "bars" and self.layout != "date":
            return sorted(dt.date.fromisoformat(d) for d in self.manifest["bar_dates"])
        prefix = f"{table}/date="
        return sorted(
            dt.date.fromisoformat(p[len(prefix):].split("/")[0])
            for p in self.manifest["partitions"]
            if p.startswith(prefix)
        )

    # -- writing --------------------------------------------------------------------------------
    def add_bars(self, bars: pd.DataFrame, *, sources: list[dict], dry_run: bool = False
                 ) -> tuple[list[str], list[dict]]:
        """Add validated bars, replacing the same ticker-days. Returns the partitions written
        and what was replaced: one record per ticker-day that held bars (ticker, date,
        stored bars, new bars). ``sources``: where the bars came from, recorded in the
        manifest (none for a fetch, which logs its own). ``dry_run``: work it out, write
        nothing."""
        if bars.empty:
            return [], []
        self._refuse_copy()
        if dry_run:  # nothing written: no lock taken
            return self._add_bars(bars, sources=sources, dry_run=True)
        with self.changing("finbench data ingest (bars)"):
            return self._add_bars(bars, sources=sources, dry_run=False)

    def _add_bars(self, bars: pd.DataFrame, *, sources: list[dict], dry_run: bool
                  ) -> tuple[list[str], list[dict]]:
        local_date = bars["ts"].dt.tz_convert(self.timezone).dt.date
        updates: dict[str, pd.DataFrame] = {}
        replaced = []
        for day, new in bars.groupby(local_date, sort=True):
            rel = f"bars/date={day.isoformat()}/part.parquet"
            old = self._read_partition(rel, "bars")
            if old is not None:
                tickers = new["ticker"].unique()
                gone = old["ticker"].isin(tickers)
                for ticker, count in old.loc[gone, "ticker"].value_counts().sort_index().items():
                    replaced.append({"ticker": ticker, "date": day.isoformat(),
                                     "stored": int(count),
                                     "new": int((new["ticker"] == ticker).sum())})
                new = pd.concat([old[~gone], new], ignore_index=True)
            updates[rel] = new.sort_values(["ticker", "ts"], kind="stable")
        if not dry_run:
            self._commit(updates, "bars", sources)
        return sorted(updates), replaced

    def add_headlines(self, headlines: pd.DataFrame, *, sources: list[dict],
                      dry_run: bool = False) -> tuple[list[str], int]:
        """Add validated headlines, replacing any stored headline with the same id. Returns
        the partitions written and how many stored headlines were replaced. ``dry_run``: work
        it out, write nothing."""
        if headlines.empty:
            return [], 0
        self._refuse_copy()
        if dry_run:  # nothing written: no lock taken
            return self._add_headlines(headlines, sources=sources, dry_run=True)
        with self.changing("finbench data ingest (headlines)"):
            return self._add_headlines(headlines, sources=sources, dry_run=False)

    def _add_headlines(self, headlines: pd.DataFrame, *, sources: list[dict], dry_run: bool
                       ) -> tuple[list[str], int]:
        replaced = 0
        ids = set(headlines["id"])
        updates: dict[str, pd.DataFrame] = {}
        for day in self.dates("headlines"):
            rel = f"headlines/date={day.isoformat()}/part.parquet"
            old = self._read_partition(rel, "headlines")
            if old is not None and old["id"].isin(ids).any():
                replaced += int(old["id"].isin(ids).sum())
                updates[rel] = old[~old["id"].isin(ids)]
        local_date = headlines["available_at"].dt.tz_convert(self.timezone).dt.date
        for day, new in headlines.groupby(local_date, sort=True):
            rel = f"headlines/date={day.isoformat()}/part.parquet"
            old = updates.get(rel)
            if old is None:
                old = self._read_partition(rel, "headlines")
            frame = new if old is None else pd.concat([old, new], ignore_index=True)
            updates[rel] = frame.sort_values(["available_at", "id"], kind="stable")
        if not dry_run:
            self._commit(updates, "headlines", sources)
        return sorted(updates), replaced

    def _commit(self, updates: dict[str, pd.DataFrame], table: str, sources: list[dict]
                ) -> None:
        """Write every partition to a temporary file and hash it, then make the change whole
        (:func:`finbench.data.commit.commit`: the partitions moved into place, an emptied one
        removed, the manifest written; a process killed midway leaves it for the next to
        finish). The caller holds :meth:`changing`."""
        schema = TABLES[table]
        moves: list[tuple[Path, Path]] = []
        hashes: dict[str, str] = {}
        try:
            for rel, frame in updates.items():
                if frame.empty:
                    continue
                final = self.path / rel
                final.parent.mkdir(parents=True, exist_ok=True)
                tmp = final.with_suffix(".parquet.tmp")
                moves.append((tmp, final))
                arrow = pa.Table.from_pandas(
                    frame.reset_index(drop=True)[schema.names], schema=schema,
                    preserve_index=False).replace_schema_metadata(None)
                with writing(final, tmp):
                    pq.write_table(arrow, tmp, compression="zstd",
                                   row_group_size=ROW_GROUP_ROWS, write_statistics=True)
                hashes[rel] = sha256_file(tmp)
        except BaseException:  # nothing of this change is left: the store is as it was
            for tmp, _ in moves:
                tmp.unlink(missing_ok=True)
            raise
        emptied = [rel for rel, frame in updates.items() if frame.empty]
        partitions = {rel: sha for rel, sha in self.manifest["partitions"].items()
                      if rel not in emptied}
        partitions.update(hashes)
        manifest = {**self.manifest, "partitions": dict(sorted(partitions.items()))}
        manifest["snapshot_sha256"] = snapshot_hash(partitions, manifest)
        # (a fetch gives none: it logs per ticker-day provenance in fetched.jsonl)
        manifest["sources"] = [*self.manifest["sources"],
                               *({"table": table, **source} for source in sources)]
        commit(self.path, MANIFEST, manifest, moves=moves,
               removals=[self.path / rel for rel in emptied])
        self.manifest = manifest

    def _refuse_copy(self) -> None:
        """A StoreError for a store laid out by ticker, which nothing changes (not even in a
        dry run, which would say what it would write into date partitions it has not)."""
        if self.layout != "date":
            raise StoreError(f"{self.path}: a store laid out by ticker is a read-only copy "
                             "(`finbench data copy --layout ticker`), never changed: change "
                             "the store it was copied from, and copy it again")

    def _writable(self) -> None:
        self._refuse_copy()
        if self.remote:
            raise StoreError(f"{self.path}: a store on object storage is read in place, never "
                             "changed there; change a local copy and upload it again")

    def _file(self, rel: str) -> str:
        """``rel``'s path in the store's filesystem."""
        return join(self.root, rel)

    def save_manifest(self) -> None:
        """Write the manifest as it is in memory (atomically, holding the store's lock)."""
        self._writable()
        with store_lock(self.path, "saving the store's manifest"):
            write_json(self.path / MANIFEST, self.manifest)

    def append_log(self, name: str, lines: list[str]) -> None:
        """Append ``lines`` to the store's log file ``name`` (a fetch's ``fetched.jsonl``)
        holding the store's lock, so two processes' lines never interleave."""
        self._writable()
        with store_lock(self.path, f"appending to the store's {name}"), \
                open(self.path / name, "a", encoding="utf-8") as log:
            log.write("".join(line + "\n" for line in lines))

    def add_source(self, source: dict) -> None:
        """Append ``source`` to the manifest's ``sources`` (under :meth:`changing`: what
        another process added since this one opened the store is kept)."""
        with self.changing("recording a source in the store's manifest"):
            self.manifest["sources"].append(source)
            write_json(self.path / MANIFEST, self.manifest)

    def _read_partition(self, rel: str, table: str) -> pd.DataFrame | None:
        """A stored partition, None when the manifest lists none there (a file it does not
        list is no part of the store: an ingest writes over it)."""
        if rel not in self.manifest["partitions"]:
            return None
        return self._read_table(rel, schema=TABLES[table]).to_pandas()

    def reading(self, rel: str):
        """:func:`read_guard` of the partition ``rel`` (noted in :attr:`partitions_read`);
        from object storage a failed read may pass the next time (``may_pass_again``: a Dask
        shard is then retried), from a local folder it will not."""
        self.partitions_read.add(rel)
        return read_guard(self._file(rel), self.root, what="partition",
                          may_pass_again=self.remote)

    # -- reading --------------------------------------------------------------------------------
    def _bar_tables(self, tickers, start, end, *, columns) -> list[pa.Table]:
        """One Arrow table per date partition in ``[start, end]``, filtered to ``tickers`` (a
        store laid out by ticker: one per ticker, each in (date, ts) order)."""
        if self.layout != "date":
            from finbench.data.by_ticker import read_tickers

            rest = [c for c in columns if c not in ("ticker", "ts")]
            tables = [table.append_column("ticker", pa.array([name] * table.num_rows,
                                                             pa.string())).select(columns)
                      for name, table in read_tickers(self, tickers, start, end, rest)]
            if not tables and any((start is None or day >= start) and (end is None or day <= end)
                                  for day in self.dates("bars")):  # as date partitions read
                tables = [pa.schema([BARS_SCHEMA.field(c) for c in columns]).empty_table()]
            return tables
        wanted = None if tickers is None else sorted(set(tickers))
        filters = None if wanted is None else [("ticker", "in", wanted)]
        parts = []
        for day in self.dates("bars"):
            if (start is not None and day < start) or (end is not None and day > end):
                continue
            rel = f"bars/date={day.isoformat()}/part.parquet"
            parts.append(self._read_table(rel, columns=columns, filters=filters,
                                          schema=BARS_SCHEMA))
        return parts

    def _read_table(self, rel: str, **kwargs) -> pa.Table:
        """The partition ``rel`` read whole by ``pq.read_table`` (``kwargs``: its options),
        under :meth:`reading`."""
        with self.reading(rel):
            source, fs = self._source(rel)
            return pq.read_table(source, filesystem=fs, **kwargs)

    def _source(self, rel: str) -> tuple[object, pafs.FileSystem | None]:
        """(source, filesystem) to read the partition ``rel`` from with pyarrow: a local file
        by its path; one on object storage as its bytes, fetched whole in one request (read
        by path, each column chunk of each row group would be a request of its own: ten for
        a day of 500 tickers, each a round trip)."""
        if self.remote:
            return pa.BufferReader(read_bytes(self.fs, self._file(rel))), None
        return self._file(rel), self.fs

    def read_bars(
        self,
        *,
        tickers: Iterable[str] | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,
        columns: list[str] | None = None,
    ) -> pd.DataFrame:
        """Bars of local dates ``[start, end]`` for ``tickers``, sorted by ticker then ts."""
        cols = columns or list(BARS_SCHEMA.names)
        for needed in ("ticker", "ts"):
            if needed not in cols:
                cols = [needed, *cols]
        parts = self._bar_tables(tickers, start, end, columns=cols)
        if not parts:
            empty = pa.schema([BARS_SCHEMA.field(c) for c in cols]).empty_table()
            return empty.to_pandas()
        frame = pa.concat_tables(parts).to_pandas(categories=["ticker"])
        # Partitions are in date order and each is sorted by (ticker, ts): a stable sort on
        # ticker alone gives (ticker, ts) order.
        codes, _ = lexical_codes(frame["ticker"])
        order = np.argsort(codes, kind="stable")
        return frame.take(order).reset_index(drop=True)

    def read_bar_arrays(
        self,
        *,
        tickers: Iterable[str] | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,
        columns: Iterable[str] = ("open", "high", "low", "close", "volume"),
    ):
        """Like :meth:`read_bars` but straight into :class:`~finbench.data.bars.BarArrays` (the fast
        path of runs).

        Each partition is sorted by (ticker, ts), so ticker-major order is the partitions'
        per-ticker runs laid end to end: the columns are assembled by concatenating those
        contiguous slices (no general sort, no per-row gather). ``ticker`` is read as a
        Parquet dictionary and filtered on its integer codes. Only ``columns`` of the bars
        are read (besides ticker and ts); the others are NaN. A store laid out by ticker:
        the tickers' files alone (:meth:`_ticker_bar_arrays`).
        """
        from finbench.data.bars import BarArrays

        columns = tuple(columns)
        if self.layout != "date":
            return self._ticker_bar_arrays(tickers, start, end, columns)
        wanted = None if tickers is None else set(tickers)
        parts = []
        for day in self.dates("bars"):
            if (start is not None and day < start) or (end is not None and day > end):
                continue
            rel = f"bars/date={day.isoformat()}/part.parquet"
            with self.reading(rel):
                source, fs = self._source(rel)
                # one file: no dataset machinery (``pq.read_table`` with a filesystem took a
                # third longer over 60 partitions)
                with pq.ParquetFile(source, read_dictionary=["ticker"], filesystem=fs) as file:
                    parts.append(file.read(columns=["ticker", "ts", *columns]).combine_chunks())
        names = sorted({name for t in parts for name in t.column("ticker").chunk(0)
                        .dictionary.to_pylist()} if parts else set())
        if wanted is not None:
            names = [n for n in names if n in wanted]
        code_of = {n: i for i, n in enumerate(names)}
        runs = []  # (code, part number, start, stop)
        for j, table in enumerate(parts):
            column = table.column("ticker").chunk(0)
            local = np.array([code_of.get(n, -1) for n in column.dictionary.to_pylist()])
            codes = local[column.indices.to_numpy(zero_copy_only=False)] if len(local) else (
                np.empty(0, np.int64))
            if len(codes) == 0:
                continue
            cuts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
            stops = np.r_[cuts[1:], len(codes)]
            runs += [(int(codes[a]), j, int(a), int(b)) for a, b in zip(cuts, stops, strict=True)
                     if codes[a] >= 0]
        runs.sort()
        raw = {c: [t.column(c).chunk(0).to_numpy() if t.num_rows else np.empty(0)
                   for t in parts] for c in columns}
        raw["ts"] = [t.column("ts").chunk(0).cast(NS_UTC).cast(pa.int64()).to_numpy()
                     if t.num_rows
                     else np.empty(0, np.int64) for t in parts]

        def gather(column: str, dtype) -> np.ndarray:
            if column not in raw:  # not read
                return np.broadcast_to(np.float64(np.nan), (int(sum(b - a for *_, a, b in runs)),))
            pieces = [raw[column][j][a:b] for _, j, a, b in runs]
            return np.concatenate(pieces).astype(dtype, copy=False) if pieces else np.empty(
                0, dtype)

        lengths = np.array([b - a for _, _, a, b in runs], dtype=np.int64)
        codes = np.repeat(np.array([c for c, *_ in runs], dtype=np.int64), lengths)
        return BarArrays.from_columns(
            codes=codes, names=np.array(names, dtype=object), ts=gather("ts", np.int64),
            bar_seconds=self.bar_seconds,
            **{c: gather(c, np.float64) for c in ("open", "high", "low", "close", "volume")})

    def _ticker_bar_arrays(self, tickers, start, end, columns):
        """:meth:`read_bar_arrays` of a store laid out by ticker: each file holds one
        ticker's bars in the order the date partitions would give them, so the columns are
        the files' laid end to end."""
        from finbench.data.bars import BarArrays
        from finbench.data.by_ticker import read_tickers

        parts = read_tickers(self, tickers, start, end, columns)
        lengths = np.array([t.num_rows for _, t in parts], np.int64)
        nan = np.broadcast_to(np.float64(np.nan), (int(lengths.sum()),))  # a column not read

        def joined(column: str) -> np.ndarray:
            if column not in ("ts", *columns):
                return nan
            if not parts:
                return np.empty(0, np.int64 if column == "ts" else np.float64)
            values = pa.chunked_array([c for _, t in parts for c in t.column(column).chunks])
            if column == "ts":
                values = values.cast(NS_UTC).cast(pa.int64())
            return values.to_numpy()

        return BarArrays.from_runs(
            starts=np.cumsum(lengths) - lengths, names=[name for name, _ in parts],
            ts=joined("ts"), bar_seconds=self.bar_seconds,
            **{c: joined(c) for c in ("open", "high", "low", "close", "volume")})

    def read_day_arrays(self, day: dt.date, *, tickers: Iterable[str] | None = None,
                        columns: Iterable[str] = ("high", "low")):
        """One date partition as :class:`~finbench.data.bars.BarArrays`, reading only ``columns``
        (besides ticker and ts); the others are NaN. A partition is already sorted by
        (ticker, ts), so nothing is re-laid: the arrays are the file's columns. None when the
        store has no bars that day. (:meth:`read_day_table`, then :meth:`day_arrays`.)"""
        table = self.read_day_table(day, columns=columns)
        return None if table is None else self.day_arrays(table, tickers=tickers)

    def read_day_table(self, day: dt.date, *, columns: Iterable[str] = ("high", "low")
                       ) -> pa.Table | None:
        """One date partition's ticker (dictionary-encoded), ts and ``columns``, as it lies on
        disk; None when the store has no bars that day. Handed over by the read-ahead when it
        holds that date (:meth:`read_ahead`), else read on the calling thread alone, as one
        file: callers read several partitions at once, and Arrow's own threads (and its
        dataset scanner's), shared by concurrent reads of small files, slow them several times
        over; the read holds no Python lock, so threads reading ahead leave the caller's
        thread free."""
        columns = tuple(columns)
        ahead = self._ahead
        if ahead is not None and set(columns) <= set(ahead.columns):
            table = ahead.take(day)
            if table is not False:
                return (table if table is None or columns == ahead.columns
                        else table.select(["ticker", "ts", *columns]))
        return self._read_day(day, columns)

    def read_day_now(self, day: dt.date, columns: Iterable[str], *, ticker: str | None = None
                     ) -> pa.Table | None:
        """:meth:`read_day_table`, read now on the calling thread: never handed over by the
        read-ahead (whose dates are the label pass's), so a reader of dates out of turn (an
        agent's tools) leaves them to it. ``ticker``: its bars alone (None when it has none
        that day), read from its own file in a store laid out by ticker (:attr:`by_ticker`);
        a store laid out by date reads the day's file of every ticker and keeps its rows."""
        if ticker is not None and self.by_ticker:
            from finbench.data.by_ticker import day_table

            return day_table(self, day, tuple(columns), tickers=[ticker])
        table = self._read_day(day, tuple(columns))
        if table is None or ticker is None:
            return table
        import pyarrow.compute as pc

        table = table.filter(pc.equal(table.column("ticker").cast(pa.string()), ticker))
        return table if table.num_rows else None

    @property
    def by_ticker(self) -> bool:
        """Whether each ticker's bars lie in files of their own (a copy laid out by ticker),
        so a read of one ticker's costs what its bars do, not what the date's do."""
        return self.layout != "date"

    def _read_day(self, day: dt.date, columns: tuple[str, ...]) -> pa.Table | None:
        if self.layout != "date":  # every ticker's file of that quarter
            from finbench.data.by_ticker import day_table

            return day_table(self, day, columns)
        rel = f"bars/date={day.isoformat()}/part.parquet"
        if rel not in self.manifest["partitions"]:  # the snapshot holds no bars that day (a
            return None  # file there it does not list is no part of it: validate names it)
        with self.reading(rel):
            source, fs = self._source(rel)
            with pq.ParquetFile(source, read_dictionary=["ticker"],
                                filesystem=fs) as file:  # no dataset machinery: it contends
                table = file.read(columns=["ticker", "ts", *columns], use_threads=False)
        return table if table.num_rows else None

    def read_ahead(self, days: Iterable[dt.date], columns: Iterable[str]) -> None:
        """Begin reading the bar partitions of ``days`` (ticker, ts and ``columns``) on a
        thread of their own, in order, for :meth:`read_day_table` to hand over
        (:mod:`finbench.data.read_ahead`); until :meth:`stop_reading_ahead`."""
        from finbench.data.read_ahead import ReadAhead

        self.stop_reading_ahead()
        columns = tuple(columns)
        self._ahead = ReadAhead(lambda day: self._read_day(day, columns), days, columns,
                                readers=REMOTE_READERS if self.remote else 1)

    def stop_reading_ahead(self) -> None:
        """Read no more ahead; what was read and not handed over is let go."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.close()

    def day_arrays(self, table: pa.Table, *, tickers: Iterable[str] | None = None):
        """:meth:`read_day_table`'s table as :class:`~finbench.data.bars.BarArrays` (the
        ``tickers`` listed, or all): the bar columns it lacks are NaN."""
        from finbench.data.bars import BarArrays

        starts, names = _ticker_runs(table.column("ticker"))
        if tickers is not None:
            wanted = set(tickers)
            keep = np.fromiter((name in wanted for name in names), bool, len(names))
            if not keep.all():
                lengths = np.diff(np.r_[starts, table.num_rows])
                table = table.filter(pa.array(np.repeat(keep, lengths)))
                lengths = lengths[keep]
                starts = (np.cumsum(lengths) - lengths).astype(np.int64)  # kept runs, in turn
                names = [name for name, k in zip(names, keep, strict=True) if k]
        nan = np.broadcast_to(np.float64(np.nan), (table.num_rows,))
        values = {c: table.column(c).to_numpy() if c in table.column_names else nan
                  for c in ("open", "high", "low", "close", "volume")}
        return BarArrays.from_runs(
            starts=starts, names=names,
            ts=table.column("ts").cast(NS_UTC).cast(pa.int64()).to_numpy(),
            bar_seconds=self.bar_seconds,
            **values)

    def read_headlines(
        self, *, start: dt.date | None = None, end: dt.date | None = None
    ) -> pd.DataFrame:
        """Headlines whose availability falls on local dates ``[start, end]``, by availability."""
        parts = []
        for day in self.dates("headlines"):
            if (start is not None and day < start) or (end is not None and day > end):
                continue
            rel = f"headlines/date={day.isoformat()}/part.parquet"
            parts.append(self._read_table(rel))
        if not parts:
            return HEADLINES_SCHEMA.empty_table().to_pandas()
        frame = pa.concat_tables(parts).to_pandas()
        return frame.sort_values(["available_at", "id"], kind="stable").reset_index(drop=True)

    # -- checking -------------------------------------------------------------------------------
    def verify(self, *, echo=None) -> list[str]:
        """Re-hash every partition and re-check its order and rules; returns the problems, in
        partition order: the hashes', then the snapshot's, then the rules'. Each partition is
        read once (its bytes hashed, and a bar partition checked from the same bytes: on
        object storage, one download), by :data:`CHECKERS` threads, each taking up to
        :data:`CHECK_CHUNK` partitions in a row (hashing, Parquet decoding and most array work
        release the GIL). ``echo``: where progress goes. A store laid out by ticker:
        :func:`~finbench.data.by_ticker.verify_by_ticker`."""
        if self.layout != "date":
            from finbench.data.by_ticker import verify_by_ticker

            return verify_by_ticker(self, echo=echo)
        problems, on_disk = self.listing_problems(DATE_FILE)
        listed = set(self.manifest["partitions"])
        both = listed & on_disk
        bars = {f"bars/date={day.isoformat()}/part.parquet": day for day in self.dates("bars")}
        bars = {rel: day for rel, day in bars.items() if rel in on_disk}
        rels = sorted(both | set(bars))  # the bar partitions in date order among them
        progress = Countdown("store", len(rels), echo, unit="partitions hashed and checked")
        size = max(1, min(CHECK_CHUNK, -(-len(rels) // (4 * CHECKERS))))  # work to share
        chunks = [rels[i:i + size] for i in range(0, len(rels), size)]
        hash_problems, rule_problems = [], []
        pool = ThreadPoolExecutor(max_workers=CHECKERS)
        try:
            for chunk, (wrong, found) in zip(chunks, pool.map(
                    lambda c: self._check_chunk(c, bars, hashed=both), chunks), strict=True):
                hash_problems += wrong
                rule_problems += found
                progress.add(len(chunk))
        finally:  # on an error or Ctrl-C, chunks not started are dropped, not checked
            pool.shutdown(cancel_futures=True)
        if self.manifest.get("snapshot_sha256") != self.snapshot_sha256:
            hash_problems.append(f"{MANIFEST}: snapshot_sha256 does not match its settings and "
                                 "partitions")
        return problems + hash_problems + rule_problems

    def listing_problems(self, *patterns: re.Pattern) -> tuple[list[str], set[str]]:
        """(problems, the store's files on disk: those matching one of ``patterns``): a
        change left unfinished, a file the manifest does not list, a listed one missing."""
        problems: list[str] = []
        found = files_under(self.fs, self.root)
        on_disk = {rel for rel in found if any(p.fullmatch(rel) for p in patterns)}
        listed = set(self.manifest["partitions"])
        if COMMIT in found:
            problems.append(f"{COMMIT}: a change to the store is not finished (a process is "
                            "making it, or one was killed making it: opening the store where "
                            "it can be written finishes it)")
        for rel in sorted(on_disk - listed):
            problems.append(f"{rel}: file is not listed in the manifest")
        for rel in sorted(listed - on_disk):
            problems.append(f"{rel}: listed in the manifest but missing")
        return problems, on_disk

    def _check_chunk(self, rels: list[str], bars: dict[str, dt.date], *, hashed: set[str]
                     ) -> tuple[list[str], list[str]]:
        """(hash problems, rule problems) of consecutive partitions ``rels``, each read once:
        its bytes hashed (those in ``hashed``) and, for those in ``bars`` (partition: date),
        checked from the same bytes (:func:`~finbench.data.partition_checks.chunk_problems`:
        small ones together). A partition whose hash differs is not named again if its bytes
        are no Parquet."""
        from finbench.data.partition_checks import chunk_problems, read_partition

        wrong: dict[str, str] = {}

        def read(rel: str) -> bytes:
            data = read_bytes(self.fs, self._file(rel))
            sha = hashlib.sha256(data).hexdigest() if rel in hashed else None
            if sha is not None and sha != self.manifest["partitions"][rel]:
                wrong[rel] = f"{rel}: content hash {sha[:12]} does not match the manifest"
            return data

        for rel in rels:
            if rel not in bars:
                read(rel)
        found = chunk_problems([(bars[rel], rel) for rel in rels if rel in bars],
                               lambda rel: read_partition(read(rel)),
                               damaged=wrong.__contains__, timezone=self.timezone,
                               bar_seconds=self.bar_seconds)
        return [wrong[rel] for rel in rels if rel in wrong], found


def _ticker_runs(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """(first row, ticker) of each run of equal tickers in a dictionary-encoded column (each
    row group has a dictionary of its own; a ticker whose rows span two row groups is one
    run). Found on the integer codes, so no text is made per row."""
    starts, names, offset = [], [], 0
    for chunk in column.chunks:
        if len(chunk):
            codes = chunk.indices.to_numpy(zero_copy_only=False)
            first = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
            words = chunk.dictionary.take(pa.array(codes[first])).to_pylist()
            if names and words[0] == names[-1]:  # the run goes on from the last row group
                first, words = first[1:], words[1:]
            starts.append(first + offset)
            names += words
            offset += len(chunk)
    return (np.concatenate(starts).astype(np.int64) if starts else np.empty(0, np.int64),
            names)
