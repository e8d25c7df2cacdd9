"""Append-only journal of forecast rows: written as answers arrive, read back on resume.

Two kinds of entry, both append-only: ``journal.jsonl``, one JSON line per answer streamed in
(LLM calls; a torn last line from a kill is dropped), and ``journal.parts/NNNNNN.parquet``,
one file per batch a forecaster answered at once (baselines; written to a temporary name and
renamed, so a part is either whole or absent).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from finbench.core.errors import RunError
from finbench.core.lookup import arrow_text
from finbench.core.outputs import writing
from finbench.runlog import forecast_table
from finbench.runlog.forecast_table import (
    Part,
    encode_rows,
    ordered_table,
    read_part,
    write_forecasts,
)
from finbench.runlog.rows import (
    ERROR,
    FORECAST_COLUMNS,
    FORECAST_SCHEMA,
    TIME_COLUMNS,
    to_table,
    typed,
)
from finbench.runlog.transcripts import Transcripts

JOURNAL = "journal.jsonl"
PARTS = "journal.parts"
SYNC_SECONDS = 1.0  # streamed lines are fsynced at least this often (and on flush)
AHEAD = 2  # parts handed to the writer thread and not yet written, at most: memory stays
# bounded (a few batches) when answers come faster than the disk takes them
# journal.jsonl as Arrow's JSON reader takes it: times as written (ISO text), typed after
_LINE_SCHEMA = pa.schema([pa.field(f.name, pa.string() if f.name in TIME_COLUMNS else f.type)
                          for f in FORECAST_SCHEMA])
_JSON_BLOCK = 1 << 26  # 64 MiB: a line must fit in one block (an LLM answer is far smaller)


class Journal:
    """One JSON line per finished (task, model); a torn last line from a kill is ignored."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / JOURNAL
        self.parts = Path(run_dir) / PARTS
        self._number: int | None = None  # the next part's number
        self._writer: ThreadPoolExecutor | None = None
        self._pending: list[Future] = []
        self._synced_at, self._unsynced = time.monotonic(), False
        self._clean_size = -1  # the file's size when it last ended with a whole line of ours
        self.transcripts = Transcripts(run_dir)

    def close(self) -> None:
        """Close the transcripts' database (SQLite folds its write-ahead log into the file);
        the journal reopens it if used again."""
        self.transcripts.close()

    def done(self) -> set[tuple[str, str]]:
        """Every (task_id, model) journalled."""
        return {(t, m) for m, ids in self.done_by_model().items() for t in ids}

    def done_by_model(self) -> dict[str, list[str]]:
        """The task ids journalled, per model."""
        self.flush()
        out: dict[str, list[str]] = {}
        for table in [self._lines(), *(read_part(part, columns=["task_id", "model"])
                                       for part in self.part_files())]:
            for model in pc.unique(table.column("model")).to_pylist():
                rows = table.filter(pc.equal(table.column("model"), model))
                out.setdefault(model, []).extend(rows.column("task_id").to_pylist())
        return out

    def open_errors(self) -> dict[str, dict[str, int]]:
        """Per model, the tasks whose last journalled row is a call that got no answer
        (``answer_status = "error"``; only streamed answers have them), with how many such
        rows each has: the attempts made so far."""
        lines = self._lines()
        if not lines.num_rows:
            return {}
        rows = lines.select(["model", "task_id", "answer_status"]).to_pandas()
        failed = rows[rows["answer_status"] == ERROR].groupby(["model", "task_id"]).size()
        last = rows.drop_duplicates(["model", "task_id"], keep="last")
        out: dict[str, dict[str, int]] = {}
        for model, task in last.loc[last["answer_status"] == ERROR, ["model", "task_id"]
                                    ].itertuples(index=False):
            out.setdefault(model, {})[task] = int(failed[(model, task)])
        return out

    def append(self, rows: pa.Table | pd.DataFrame, *, background: bool = False,
               finish: Callable[[pa.Table], pa.Table] | None = None) -> Path | None:
        """Append a batch (a table of the forecast schema, or a frame of its columns) as one
        Parquet part (written to a temporary name, fsynced, renamed), encoded as the forecast
        table's row groups are; returns the part's path (None for no rows).
        ``background``: a writer thread writes it while the caller goes on; :meth:`flush`
        (which every read of the journal calls first) waits for it and raises its error.
        With :data:`AHEAD` parts already waiting, it first waits for the oldest (and raises
        its error, if writing it failed). ``finish``: what completes the rows (of the same
        schema) before they are written, on the writer thread when in the background
        (:meth:`~finbench.forecasters.base.Forecaster.forecast_later`)."""
        table = rows if isinstance(rows, pa.Table) else to_table(rows)
        if table.num_rows == 0:
            return None
        if not table.schema.equals(FORECAST_SCHEMA):
            raise ValueError(f"{self.parts}: a part must have the forecast table's schema, "
                             f"not {table.schema}")
        table = table.replace_schema_metadata(FORECAST_SCHEMA.metadata)
        while len(self._pending) >= AHEAD:
            self._pending.pop(0).result()
        self.parts.mkdir(exist_ok=True)
        if self._number is None:  # after the last part on disk (numbers may have gaps)
            self._number = max(map(_part_number, self.part_files()), default=-1) + 1
        final = self.parts / f"{self._number:06d}.parquet"
        self._number += 1
        if not background:
            _write_finished(table, finish, final)
            return final
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="journal")
        self._pending.append(self._writer.submit(_write_finished, table, finish, final))
        return final

    def flush(self) -> None:
        """Wait until every part handed to the writer thread is on disk, and fsync the lines
        appended since the last fsync."""
        pending, self._pending = self._pending, []
        for future in pending:
            future.result()
        if self._unsynced and self.path.is_file():
            with open(self.path, "rb+") as fh:
                os.fsync(fh.fileno())
            self._synced_at, self._unsynced = time.monotonic(), False

    def settle(self) -> list[BaseException]:
        """Wait until every part handed to the writer thread is written or has failed, and
        return the errors (for a caller already failing, whose own error comes first)."""
        pending, self._pending = self._pending, []
        return [e for e in (f.exception() for f in pending) if e is not None]

    def part_files(self) -> list[Path]:
        """The journal's parts, in the order written."""
        return sorted(self.parts.glob("*.parquet")) if self.parts.is_dir() else []

    def write_ordered(self, path: Path, task_ids, models: list[str]) -> None:
        """Write the forecast table (:func:`~finbench.runlog.forecast_table.ordered_table` of
        the journal) to ``path``, whole or not at all, in the row groups of
        :func:`~finbench.runlog.forecast_table.write_forecasts` whatever the parts.

        Model by model, so memory holds the streamed lines (as Arrow columns) and one model's
        rows at most: a model whose rows are only in parts that, in the order written, hold
        its tasks in task order, each once (what a run writes for baselines), is copied one
        part at a time; any other model (answers streamed into ``journal.jsonl``, or parts out
        of order) is ordered in memory on its own. Only a part that mixes models (no run
        writes one) makes the whole journal be ordered at once."""
        self.flush()
        by_model = self._parts_by_model(models)
        if by_model is None:
            write_forecasts(path, [ordered_table(self.table(), task_ids, models)])
            return
        ids = arrow_text(task_ids)
        lines = self._lines()
        write_forecasts(path, (table for model in models
                               for table in self._model_tables(model, by_model.get(model, []),
                                                               lines, ids)))

    def model_sources(self, model: str, lines: pa.Table | None = None
                      ) -> tuple[list[Path], pa.Table]:
        """Where ``model``'s journalled rows are: its parts (in the order written; every part
        when a part mixes models, which no run writes) and its streamed lines in the journal's
        schema (written after the parts). Of rows of one task, the last written counts.
        ``lines``: :meth:`lines`, when the caller reads several models."""
        self.flush()
        lines = self._lines() if lines is None else lines
        by_model = self._parts_by_model([model])
        parts = self.part_files() if by_model is None else by_model.get(model, [])
        mine = lines.filter(pc.equal(lines.column("model"), model))
        return parts, (_typed_lines(mine) if mine.num_rows else FORECAST_SCHEMA.empty_table())

    def lines(self) -> pa.Table:
        """The streamed rows (``journal.jsonl``) as text and numbers, in the order written."""
        return self._lines()

    def _model_tables(self, model: str, parts: list[Path], lines: pa.Table, ids: pa.Array):
        """One model's rows in task order: its parts one at a time when they line up, else
        its parts and streamed lines ordered in memory (the last written row of a task
        wins, as in :func:`ordered_table`)."""
        mine = lines.filter(pc.equal(lines.column("model"), model))
        if not mine.num_rows:
            written = [arrow_text(read_part(p, columns=["task_id"]).column("task_id"))
                       for p in parts]
            if written and pa.concat_arrays(written).equals(ids):
                yield from _aligned_parts(parts, [len(w) for w in written], model)
                return
        tables = [read_part(p, schema=FORECAST_SCHEMA) for p in parts]
        if mine.num_rows:
            tables.append(_typed_lines(mine))
        if tables:
            yield ordered_table(pa.concat_tables(tables), ids, [model])

    def _parts_by_model(self, models: list[str]) -> dict[str, list[Path]] | None:
        """The parts of each listed model in the order written; None if a part mixes models.
        Parts of models not listed are left out."""
        found: dict[str, list[Path]] = {}
        for part in self.part_files():
            names = pc.unique(read_part(part, columns=["model"]).column("model"))
            if len(names) != 1:
                return None
            if names[0].as_py() in models:
                found.setdefault(names[0].as_py(), []).append(part)
        return found

    def append_records(self, records: list[dict], *, sync: bool = True,
                       transcripts: list[dict] | None = None) -> None:
        """Append plain dict rows (one JSON line each), handed to the OS at once (a killed
        process loses none of them) and fsynced: now with ``sync``, else within
        :data:`SYNC_SECONDS` of the last fsync and on :meth:`flush` (a crash of the machine
        loses at most that long of answers streamed one by one). ``transcripts``: what the
        calls behind them sent and received (:class:`Transcripts`), stored first."""
        if not records:
            return
        if transcripts:
            self.transcripts.put(transcripts)
        try:  # a file as this journal left it needs no look at its tail
            torn = os.stat(self.path).st_size != self._clean_size
        except FileNotFoundError:
            torn = False
        if torn:  # (a kill mid-line, in an earlier process or another writer's)
            drop_torn_tail(self.path)
        lines = [json.dumps({k: _plain(rec.get(k)) for k in FORECAST_COLUMNS}, sort_keys=True)
                 for rec in records]
        self._clean_size = -1  # (until the write below is whole)
        with writing(self.path), open(self.path, "a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
            fh.flush()
            now = time.monotonic()
            if sync or now - self._synced_at >= SYNC_SECONDS:
                os.fsync(fh.fileno())
                self._synced_at, self._unsynced = now, False
            else:
                self._unsynced = True
            self._clean_size = fh.tell()

    def _lines(self) -> pa.Table:
        """The streamed rows (``journal.jsonl``) in the order written, as text and numbers
        (times as written), parsed by Arrow's JSON reader; the torn last line of a killed
        run is left out."""
        if not self.path.is_file() or self.path.stat().st_size == 0:
            return _LINE_SCHEMA.empty_table()
        data = pa.memory_map(str(self.path)).read_buffer()
        end = _whole_lines(data)
        if end == 0:
            return _LINE_SCHEMA.empty_table()
        try:
            return pj.read_json(
                pa.BufferReader(data.slice(0, end)),
                read_options=pj.ReadOptions(block_size=_JSON_BLOCK),
                parse_options=pj.ParseOptions(explicit_schema=_LINE_SCHEMA,
                                              unexpected_field_behavior="ignore"))
        except pa.ArrowInvalid as error:
            raise RunError(f"{self.path}: {_first_bad_line(data.slice(0, end))} is not a "
                           f"journal line ({error}); the file was changed after the run wrote "
                           "it: restore it from a copy of the run") from None

    def frame(self) -> pd.DataFrame:
        """Every journalled row as a typed frame (later rows win, though none repeat)."""
        table = self.table()
        keys = pd.DataFrame({"t": table.column("task_id").to_numpy(zero_copy_only=False),
                             "m": table.column("model").to_numpy(zero_copy_only=False)})
        keep = ~keys.duplicated(keep="last").to_numpy()
        return typed(table.filter(pa.array(keep)).to_pandas()).reset_index(drop=True)

    def table(self) -> pa.Table:
        """Every journalled row, in the order written (Parquet parts, then streamed lines)."""
        self.flush()
        parts = [read_part(p, schema=FORECAST_SCHEMA) for p in self.part_files()]
        lines = self._lines()
        if lines.num_rows:
            parts.append(_typed_lines(lines))
        return pa.concat_tables(parts) if parts else FORECAST_SCHEMA.empty_table()


def drop_torn_tail(path: Path) -> None:
    """Cut an unfinished last line of a line-per-record file (a kill mid-write) so the next
    append starts clean."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return
        data = fh.seek(0) or fh.read()
        fh.truncate(data.rfind(b"\n") + 1)


def _first_bad_line(data: pa.Buffer) -> str:
    """``line N``: the first line of ``data`` that is no journal line, read one at a time
    (only when Arrow's reader has refused the file: it names no line)."""
    for number, line in enumerate(data.to_pybytes().splitlines(), 1):
        try:
            pj.read_json(pa.BufferReader(line), parse_options=pj.ParseOptions(
                explicit_schema=_LINE_SCHEMA, unexpected_field_behavior="ignore"))
        except pa.ArrowInvalid:
            return f"line {number}"
    return "a line"


def _whole_lines(data: pa.Buffer) -> int:
    """Length of ``data`` up to and including its last newline (0 if it has none)."""
    step = 1 << 16
    for start in range(max(data.size - step, 0), -step, -step):
        start = max(start, 0)
        at = data.slice(start, min(step, data.size - start)).to_pybytes().rfind(b"\n")
        if at >= 0:
            return start + at + 1
        if start == 0:
            break
    return 0


def _aligned_parts(parts: list[Path], rows: list[int], model: str):
    """A model's parts, which hold its rows in order, as :class:`Part`: copied into the
    forecast table as they are when each starts a row group and fills it (or ends the model's
    rows)."""
    done, total = 0, sum(rows)
    for path, n in zip(parts, rows, strict=True):
        size = forecast_table.ROW_GROUP
        whole = done % size == 0 and (n == size or done + n == total)
        yield Part(path, model, n) if whole else read_part(path, schema=FORECAST_SCHEMA)
        done += n


def _typed_lines(lines: pa.Table) -> pa.Table:
    """Rows of :meth:`Journal._lines` in the journal's schema."""
    return to_table(typed(lines.to_pandas()))


def _part_number(path: Path) -> int:
    if not (path.stem.isdigit() and path.stem.isascii()):
        raise ValueError(f"{path}: not a journal part (parts are named NNNNNN.parquet); "
                         "move it out of the run directory")
    return int(path.stem)


def _write_finished(table: pa.Table, finish, final: Path) -> None:
    """:func:`_write_part` of the rows ``finish`` completes (None: complete)."""
    _write_part(table if finish is None else finish(table), final)


def _write_part(table: pa.Table, final: Path) -> None:
    """Write a part whole or not at all (encoded as the forecast table's row groups are):
    temporary name, fsync, rename."""
    tmp = final.with_suffix(".tmp")
    try:
        with writing(final, tmp):
            encode_rows(table, tmp)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, final)


def _plain(value):
    if value is None or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if value is pd.NA:
        return None
    return value


