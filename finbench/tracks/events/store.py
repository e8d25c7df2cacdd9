"""The event store (docs/spec.md §11.1): markets, their YES price histories and a frozen
snapshot of posts, as Parquet with a manifest of SHA-256 hashes.

    STORE/manifest.json
    STORE/markets.parquet                      one row a market, by market_id
    STORE/prices.parquet                       market_id, time, price (of YES), sorted
    STORE/posts/date=YYYY-MM-DD/part.parquet   posts of that UTC date, by created_utc, post_id

Every ingest checks all of its input before anything is written; then it writes the new
files beside the old and makes the change whole (:mod:`finbench.data.commit`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from finbench.core.errors import DataError, StoreError
from finbench.core.location import is_uri
from finbench.core.outputs import writing
from finbench.data.commit import change_lock, commit, finish_unless_busy
from finbench.data.store import (
    changed_while_read,
    check_fields,
    manifest_object,
    read_guard,
    sha256_file,
)
from finbench.tracks.events.markets import read_markets, read_prices
from finbench.tracks.events.posts import POSTS_SCHEMA, read_dump

FORMAT = "finbench-event-store"
MANIFEST = "manifest.json"


EVENT_FIELDS = {"format": str, "version": int, "files": dict, "dumps": list, "synthetic": bool,
                "description": str, "snapshot_sha256": str}


def is_event_store(path: str | Path) -> bool:
    """Whether the local folder ``path`` holds an event store (its manifest says so)."""
    file = Path(path) / MANIFEST
    if is_uri(path) or not file.is_file():
        return False
    try:
        return json.loads(file.read_text()).get("format") == FORMAT
    except (ValueError, UnicodeDecodeError, AttributeError):
        return False


def event_snapshot_hash(files: dict[str, str]) -> str:
    """One hash over the store's files (sorted ``path sha`` lines)."""
    text = "finbench-event-snapshot-v1\n" + "".join(
        f"{path} {sha}\n" for path, sha in sorted(files.items()))
    return hashlib.sha256(text.encode()).hexdigest()


class EventStore:
    """An event store folder; ``manifest`` is its manifest."""

    def __init__(self, path: str | Path, manifest: dict | None = None) -> None:
        if is_uri(path):
            raise StoreError(f"{path}: the event track reads its store from a local folder, "
                             "not from object storage (copy it down: finbench data copy)")
        self.path = Path(path)
        self.files_read: set[str] = set()  # (:meth:`check_unchanged`)
        file = self.path / MANIFEST
        if manifest is not None:
            self.manifest = manifest
            return
        if self.path.is_dir():  # a change a killed process left undone
            finish_unless_busy(self.path)
        if not file.is_file():
            raise StoreError(f"{self.path}: no {MANIFEST} (ingest markets and posts first: "
                             "finbench data ingest --markets/--posts)")
        self.manifest = self._load_manifest()

    def check_unchanged(self) -> None:
        """A StoreError when a file this object read is no longer the one its manifest listed
        when opened (another process changed the store while it was read)."""
        now = self._load_manifest()
        changed = sorted(rel for rel in self.files_read
                         if now["files"].get(rel) != self.manifest["files"].get(rel))
        if changed:
            raise changed_while_read(self.path, changed, "file(s)")

    def _load_manifest(self) -> dict:
        file = self.path / MANIFEST
        manifest = manifest_object(file.read_bytes(), str(file))
        if manifest.get("format") != FORMAT:
            raise StoreError(f"{file}: not an event store (format "
                             f"{manifest.get('format')!r}, expected {FORMAT!r})")
        check_fields(manifest, str(file), EVENT_FIELDS, "files")
        return manifest

    @contextmanager
    def changing(self, command: str, *, dry_run: bool = False):
        """Hold the store's lock for a change (:mod:`finbench.data.commit`), with the
        manifest read again under it (another process may have changed the store since this
        one opened it); a dry run takes no lock."""
        if dry_run:
            yield
            return
        new = not self.path.exists()
        with change_lock(self.path, command):
            try:
                if (self.path / MANIFEST).is_file():
                    self.manifest = self._load_manifest()
                yield
            except BaseException:
                if new and not (self.path / MANIFEST).exists():  # made here, nothing in it
                    shutil.rmtree(self.path, ignore_errors=True)
                raise

    @classmethod
    def open_or_create(cls, path: str | Path, *, synthetic: bool = False,
                       description: str = "") -> EventStore:
        """An existing store, or a new empty one (written by its first ingest)."""
        path = Path(path)
        if (path / MANIFEST).is_file():
            return cls(path)
        return cls(path, {"format": FORMAT, "version": 1, "files": {}, "dumps": [],
                          "synthetic": synthetic, "description": description,
                          "snapshot_sha256": event_snapshot_hash({})})

    @property
    def snapshot_sha256(self) -> str:
        return self.manifest["snapshot_sha256"]

    @property
    def synthetic(self) -> bool:
        return bool(self.manifest.get("synthetic"))

    # -- reading ---------------------------------------------------------------------------
    def markets(self) -> pd.DataFrame:
        return self._read("markets.parquet")

    def prices(self) -> pd.DataFrame:
        return self._read("prices.parquet")

    def _read(self, name: str) -> pd.DataFrame:
        file = self.path / name
        if name not in self.manifest["files"] or not file.is_file():
            raise StoreError(f"{self.path}: holds no {name} (ingest markets first)")
        self.files_read.add(name)
        with read_guard(file, self.path, what="file"):
            return pd.read_parquet(file)

    def post_dates(self) -> list[dt.date]:
        return sorted(dt.date.fromisoformat(rel.split("=")[1].split("/")[0])
                      for rel in self.manifest["files"] if rel.startswith("posts/"))

    def read_posts(self, start: pd.Timestamp, end: pd.Timestamp) -> pa.Table:
        """Posts with ``start <= created_utc < end`` (UTC), from the date partitions that can
        hold them, sorted by created_utc then post_id."""
        last = end.date() if end > end.normalize() else end.date() - dt.timedelta(days=1)
        days = [d for d in self.post_dates() if start.date() <= d <= last]  # (UTC dates)
        tables = []
        for day in days:
            self.files_read.add(_post_rel(day))
            with read_guard(self.path / _post_rel(day), self.path, what="file"):
                tables.append(pq.read_table(self.path / _post_rel(day)))
        if not tables:
            return POSTS_SCHEMA.empty_table()
        return posts_between(pa.concat_tables(tables), start, end)

    # -- ingest ----------------------------------------------------------------------------
    def ingest(self, *, markets=None, prices=None, posts=None, default_category: str | None = None,
               unusable: str = "skip", dry_run: bool = False) -> dict:
        """Markets (replacing stored ones of the same id) with their price histories (a
        market's stored prices are replaced by the new file's when it has any), and a dump's
        posts merged into the date partitions (a post id appears once in a partition: the
        same id from two dumps is refused, naming both): everything read and checked, then
        written as one change, so a broken rule anywhere writes nothing. ``unusable``: what
        becomes of a Gamma market no binary question can be asked of (skipped and counted
        by reason, or refused: :func:`~finbench.tracks.events.markets.read_markets`).
        Returns the counts: ``markets``, ``void``, ``replaced``, ``skipped`` (by reason),
        ``prices``, ``empty_histories``, ``posts``, ``dates`` and the dump's facts."""
        if prices is not None and markets is None:
            raise DataError("--prices goes with --markets (the markets they price)")
        with self.changing("finbench data ingest (events)", dry_run=dry_run):
            spill = self.path if self.path.is_dir() else self.path.resolve().parent
            spill.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=spill, prefix=".finbench-ingest-") as tmp:
                updates, done, source, dump = {}, {}, None, None
                if markets is not None:
                    part, done = self._market_updates(markets, prices, default_category,
                                                      unusable)
                    updates.update(part)
                    source = {"markets": str(markets),
                              "prices": str(prices) if prices else None}
                if posts is not None:
                    part, counts, dump = self._post_updates(posts, Path(tmp))
                    updates.update(part)
                    done.update(counts)
                if not dry_run and updates:
                    self._commit(updates, source=source, dump=dump)
        return done

    def add_markets(self, markets_file, prices, *, default_category: str | None = None,
                    unusable: str = "skip", dry_run: bool = False) -> dict:
        """:meth:`ingest` of markets and their prices alone."""
        return self.ingest(markets=markets_file, prices=prices,
                           default_category=default_category, unusable=unusable,
                           dry_run=dry_run)

    def add_posts(self, dump, *, dry_run: bool = False) -> dict:
        """:meth:`ingest` of a dump's posts alone."""
        return self.ingest(posts=dump, dry_run=dry_run)

    def _market_updates(self, markets_file, prices, default_category: str | None,
                        unusable: str) -> tuple[dict, dict]:
        read = read_markets(markets_file, default_category=default_category, unusable=unusable)
        new = read.frame
        old = self.markets() if "markets.parquet" in self.manifest["files"] else None
        replaced = 0 if old is None else int(old["market_id"].isin(new["market_id"]).sum())
        merged = new if old is None else pd.concat(
            [old[~old["market_id"].isin(new["market_id"])], new], ignore_index=True)
        merged = merged.sort_values("market_id", kind="stable").reset_index(drop=True)
        updates = {"markets.parquet": _writer(merged)}
        n_prices, empty = 0, []
        if prices is not None:
            table, empty = read_prices(prices, merged["market_id"], tokens=read.tokens)
            n_prices = len(table)
            stored = self.prices() if "prices.parquet" in self.manifest["files"] else None
            if stored is not None:
                table = pd.concat([stored[~stored["market_id"].isin(table["market_id"])],
                                   table], ignore_index=True)
            updates["prices.parquet"] = _writer(table.sort_values(
                ["market_id", "time"], kind="stable").reset_index(drop=True))
        return updates, {"markets": len(new), "replaced": replaced, "prices": n_prices,
                         "void": int((new["outcome"] == "void").sum()),
                         "skipped": dict(sorted(read.skipped.items())),
                         "empty_histories": len(empty)}

    def _post_updates(self, dump, tmp: Path) -> tuple[dict, dict, dict]:
        """The posts partitions a dump changes (spilled into ``tmp`` by date while it is
        read, never held whole), its counts and its facts."""
        facts: dict = {}
        chunks: dict[dt.date, list[Path]] = {}
        for number, batch in enumerate(read_dump(dump, facts)):
            days = pc.floor_temporal(batch.column("created_utc"), unit="day")
            for day in pc.unique(days).to_pylist():
                part = batch.filter(pc.equal(days, pa.scalar(day, days.type)))
                file = tmp / f"{day.date()}-{number:06d}.parquet"
                pq.write_table(part, file)
                chunks.setdefault(day.date(), []).append(file)
        updates, posts = {}, 0
        for day, files in sorted(chunks.items()):  # a date at a time, written out at once
            table = pa.concat_tables(pq.read_table(f) for f in files)
            posts += table.num_rows
            rel = _post_rel(day)
            if rel in self.manifest["files"]:
                table = pa.concat_tables([pq.read_table(self.path / rel), table])
            _refuse_duplicates(table, dump, day)
            order = pc.sort_indices(table, [("created_utc", "ascending"),
                                            ("post_id", "ascending")])
            done = tmp / f"{day}.parquet"
            pq.write_table(table.take(order), done)
            for f in files:
                f.unlink()
            updates[rel] = _moved(done)
        return updates, {"posts": posts, "dates": len(chunks), **facts}, facts

    def _commit(self, updates: dict, *, source: dict | None = None, dump: dict | None = None
                ) -> None:
        """Each update written beside its file and hashed, then the change made whole
        (:func:`finbench.data.commit.commit`: files moved into place, then the manifest)."""
        self.path.mkdir(parents=True, exist_ok=True)
        files = dict(self.manifest["files"])
        moves: list[tuple[Path, Path]] = []
        try:
            for rel, write in updates.items():
                target = self.path / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(target.name + ".tmp")
                moves.append((tmp, target))
                with writing(target, tmp):
                    write(tmp)
                files[rel] = sha256_file(tmp)
        except BaseException:  # nothing of this change is left: the store is as it was
            for tmp, _ in moves:
                tmp.unlink(missing_ok=True)
            raise
        manifest = {**self.manifest, "files": dict(sorted(files.items())),
                    "snapshot_sha256": event_snapshot_hash(files)}
        if dump:
            manifest["dumps"] = [*self.manifest["dumps"], dump]
        if source:
            manifest["markets_source"] = source
        commit(self.path, MANIFEST, manifest, moves=moves, removals=[])
        self.manifest = manifest

    def verify(self) -> list[str]:
        """Each file against its manifest hash, and the snapshot hash against the files'
        hashes (a file edited with its hash in the manifest made again would otherwise pass
        under the same snapshot id); one line per problem."""
        problems = []
        snapshot = event_snapshot_hash(self.manifest["files"])
        if snapshot != self.manifest["snapshot_sha256"]:
            problems.append(f"{self.path / MANIFEST}: snapshot_sha256 "
                            f"{self.manifest['snapshot_sha256'][:12]} is not the hash of the "
                            f"files it lists ({snapshot[:12]}): the store was changed after "
                            "ingest")
        for rel, sha in self.manifest["files"].items():
            file = self.path / rel
            if not file.is_file():
                problems.append(f"{file}: missing (the manifest lists it)")
            elif sha256_file(file) != sha:
                problems.append(f"{file}: SHA-256 differs from the manifest (changed after "
                                "ingest)")
        return problems


def posts_between(posts: pa.Table, start: pd.Timestamp, end: pd.Timestamp) -> pa.Table:
    """The rows of ``posts`` made in ``[start, end)``, in their order."""
    created = posts.column("created_utc")
    return posts.filter(pc.and_(
        pc.greater_equal(created, pa.scalar(start.as_unit("ns"), created.type)),
        pc.less(created, pa.scalar(end.as_unit("ns"), created.type))))


def _post_rel(day: dt.date) -> str:
    return f"posts/date={day.isoformat()}/part.parquet"


def _writer(frame: pd.DataFrame):
    """A writer of ``frame`` as Parquet without pandas' metadata, which names the pandas that
    wrote it: the file's bytes, and so the store's snapshot, are then those of its rows alone,
    whatever pandas ingested them (read back, the frame is the same: its columns' Arrow types
    say all pandas needs)."""
    table = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None)
    return lambda tmp: pq.write_table(table, tmp)


def _moved(done: Path):
    """A writer that moves the finished file ``done`` (beside the store: one file system)
    into place."""
    return lambda tmp: os.replace(done, tmp)


def _refuse_duplicates(table: pa.Table, dump, day: dt.date) -> None:
    if pc.count_distinct(table.column("post_id")).as_py() == table.num_rows:
        return  # (counted by hashing, in Arrow; the ids twice are found only when there are)
    ids = table.column("post_id").to_numpy(zero_copy_only=False)
    unique, counts = np.unique(ids, return_counts=True)
    twice = unique[counts > 1]
    if len(twice):
        raise DataError(f"{dump}: {len(twice)} post id(s) of {day} appear twice (in this "
                        "dump or already in the store); nothing was written",
                        [f"post_id {p}" for p in twice[:20]])
