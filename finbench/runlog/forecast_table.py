"""The forecast table (``forecasts.parquet``): one row per (task asked, model), the models in
turn and each model's rows in task order. Each model's rows are cut into row groups of exactly
:data:`ROW_GROUP` rows (its last one shorter), a row group never holding two models, so a
reader of one model (scoring, the merge of shards, the audit) decodes that model's row groups
alone: the ``model`` column's statistics tell them apart.

Every row group is encoded on its own, as a Parquet file of that one group
(:func:`encode_rows`), and the table is those files joined (:mod:`~finbench.runlog.parquet_join`:
their bytes copied, the footer rewritten). So the file's bytes depend on its rows only, and a
journal part that holds exactly one row group's rows, encoded the same way, is copied into the
table as it is, never decoded and encoded again: a baselines-only run encodes each row once.
Written whole from journal parts or rows (:func:`write_forecasts`), or joined from tables
holding its rows in order (:func:`join_tables`: the merge of shards, whose row groups are
copied as the shards wrote them, so a merged table's groups break where its shards do)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from finbench.core.errors import RunError
from finbench.core.lookup import arrow_text, positions
from finbench.core.outputs import writing
from finbench.runlog.parquet_join import JoinError, RowGroupJoiner, row_group_rows
from finbench.runlog.rows import FORECAST_COLUMNS, FORECAST_SCHEMA

ROW_GROUP = 131_072  # rows per row group of the forecast table
# Columns whose values differ from row to row (ids, digests, answers): Parquet would build a
# dictionary of them only to give it up once it outgrows a page, so they are written plain;
# the others (models, times, counts, baselines' probabilities) keep dictionary pages.
_ROW_UNIQUE = ("task_id", "lower", "upper", "raw", "rationale", "input_sha256")
PARQUET_OPTIONS = {"compression": "zstd",
                   "use_dictionary": [c for c in FORECAST_COLUMNS if c not in _ROW_UNIQUE]}


def encode_rows(table: pa.Table, where) -> None:
    """Write forecast rows as a Parquet file (a path or an Arrow output stream), a row group
    per :data:`ROW_GROUP` rows: how journal parts and every row group of the forecast table
    are encoded, so equal rows give equal bytes."""
    table = table.replace_schema_metadata(FORECAST_SCHEMA.metadata).combine_chunks()
    pq.write_table(table, where, row_group_size=ROW_GROUP, **PARQUET_OPTIONS)


def _template() -> bytes:
    """A forecast table without rows: the schema and metadata every row group must share."""
    sink = pa.BufferOutputStream()
    pq.ParquetWriter(sink, FORECAST_SCHEMA, **PARQUET_OPTIONS).close()
    return sink.getvalue().to_pybytes()


def table_joiner(path: Path) -> RowGroupJoiner:
    """A :class:`RowGroupJoiner` writing a forecast table to ``path``."""
    return RowGroupJoiner(path, _template())


@dataclass(frozen=True)
class Part:
    """A journal part holding one model's rows (``rows`` of them), to be copied into the table
    as it is when it is exactly one of its row groups."""

    path: Path
    model: str
    rows: int


def write_forecasts(path: Path, tables, *, synced: bool = True) -> None:
    """Write the rows of ``tables`` (forecast tables or :class:`Part`, in order) as one Parquet
    file, whole or not at all, in the row groups of :class:`_RowGroups`; fsynced before it
    takes its name, unless ``synced`` is False (a caller that syncs it, with
    :func:`~finbench.core.outputs.sync_file`, before any record names it)."""
    def fill(joiner: RowGroupJoiner) -> None:
        groups = _RowGroups(joiner)
        for table in tables:
            if isinstance(table, Part):
                groups.add_part(table)
            else:
                groups.add(table)
        groups.finish()

    _write_joined(path, fill, synced=synced)


def _write_joined(path: Path, fill, *, synced: bool = True) -> bool:
    """Write the forecast table ``path`` whole or not at all: ``fill(joiner)`` adds its row
    groups to a :class:`RowGroupJoiner` writing a temporary file, which then takes the
    path's name (fsynced first unless ``synced`` is False); False from ``fill``: no table
    after all, and no file left. Whatever fails, no temporary file is left."""
    tmp = Path(path).with_suffix(".tmp")
    joined = None
    try:
        with writing(path, tmp):
            joined = table_joiner(tmp)
            if fill(joined) is False:
                joined.abort()
                tmp.unlink()
                return False
            joined.close(synced=synced)
    except BaseException:
        if joined is not None:
            joined.abort()
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    return True


class _RowGroups:
    """Cuts the rows handed to it into row groups of exactly ROW_GROUP rows of one model (a run
    of one model's rows ends its row group, the last of the run may be shorter), each encoded
    by :func:`encode_rows` and joined; a :class:`Part` that is exactly the next row group is
    joined as it is."""

    def __init__(self, joiner: RowGroupJoiner) -> None:
        self.joiner, self.held, self.count, self.model = joiner, [], 0, None

    def add(self, table: pa.Table, model: str | None = None) -> None:
        """Take the next rows; ``model``: the one model they all belong to, when the caller
        knows (else their runs of one model are found here)."""
        runs = _model_runs(table) if model is None else [(model, table)] if table.num_rows else []
        for model, rows in runs:
            self._start(model)
            self.held.append(rows)
            self.count += rows.num_rows
            while self.count >= ROW_GROUP:
                joined = pa.concat_tables(self.held)
                self._write(joined.slice(0, ROW_GROUP))
                self.held, self.count = [joined.slice(ROW_GROUP)], self.count - ROW_GROUP

    def add_part(self, part: Part, whole: bool = True) -> None:
        """Take the rows of a journal part: copied as they are when they make one row group
        (``whole``: the caller knows they end the model's rows or fill a group; nothing of
        the model is held), else read and added as rows."""
        self._start(part.model)
        if whole and not self.count and part.rows <= ROW_GROUP:
            try:
                body, meta = self.joiner.check(part.path)  # its footer read, not its rows
            except JoinError:
                pass  # written another way (an older run): encoded again below
            else:
                if row_group_rows(meta) == [part.rows]:
                    self.joiner.add_checked(body, meta)
                    return
        self.add(read_part(part.path, schema=FORECAST_SCHEMA), part.model)

    def _start(self, model: str) -> None:
        if model != self.model:
            self.finish()
            self.model = model

    def _write(self, rows: pa.Table) -> None:
        sink = pa.BufferOutputStream()
        encode_rows(rows, sink)
        self.joiner.add(sink.getvalue(), "a row group")

    def finish(self) -> None:
        """Write the rows held (the end of a model's run) as a row group."""
        if self.count:
            self._write(pa.concat_tables(self.held))
        self.held, self.count = [], 0


def read_part(path: Path, **kwargs) -> pa.Table:
    """A journal part (``kwargs``: those of ``pq.read_table``); a damaged one is a RunError
    naming it."""
    try:
        return pq.read_table(path, **kwargs)
    except (pa.ArrowInvalid, OSError) as exc:
        raise RunError(f"{path}: cannot be read as a journal part ({exc}); the file is damaged: "
                       "restore it from a copy of the run") from None


def model_rows(path: Path, model: str, columns: list[str]) -> pa.Table:
    """``columns`` of one model's rows of a forecast table, in file order. The row groups
    holding them are told apart by the ``model`` column's statistics and read alone (no row is
    filtered); a table whose statistics cannot tell (none written, a null model, two models in
    one row group: not written by this module) is read through a filter on every row."""
    with pq.ParquetFile(path) as file:
        groups = model_row_groups(file.metadata, model)
        if groups is not None:  # every row's model is this one: not read (nor decoded)
            read = [c for c in columns if c != "model"]
            table = file.read_row_groups(groups, columns=read)
            if len(read) == len(columns):
                return table
            return table.add_column(columns.index("model"), file.schema_arrow.field("model"),
                                    pa.repeat(pa.scalar(model, pa.string()), table.num_rows))
    return pq.read_table(path, columns=columns, filters=[("model", "=", model)])


def model_row_groups(meta: pq.FileMetaData, model: str) -> list[int] | None:
    """The row groups of a forecast table's footer holding ``model``'s rows, by the ``model``
    column's statistics; None when some row group's cannot say it holds one model alone."""
    at = meta.schema.names.index("model")
    groups = []
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(at).statistics
        if (stats is None or not stats.has_min_max or stats.null_count != 0
                or stats.min != stats.max):
            return None
        if stats.min == model:
            groups.append(g)
    return groups


def _model_runs(table: pa.Table) -> list[tuple[str, pa.Table]]:
    """``table`` cut into its runs of rows of one model: (model, rows) in order."""
    if table.num_rows == 0:
        return []
    runs = pc.run_end_encode(table.column("model").combine_chunks())
    ends = runs.run_ends.to_numpy()
    starts = np.r_[0, ends[:-1]]
    return [(model, table.slice(a, b - a)) for model, a, b
            in zip(runs.values.to_pylist(), starts.tolist(), ends.tolist(), strict=True)]


def join_tables(path: Path, sources: list[Path], task_ids, models: list[str]) -> bool:
    """Write the forecast table of ``models`` over ``task_ids`` at ``path`` from forecast
    tables whose rows lie in its order one after the other (shards of disjoint date ranges,
    in order of their dates): each model's row groups of each source copied in turn, byte for
    byte, so a model's rows break into row groups where the sources' did. Only ``task_id`` is
    decoded, to check that each model's rows are tasks of ``task_ids`` in their order, each
    once; rows of other models are left out, as :func:`ordered_table` leaves them. True when
    it wrote the file (fsynced, whole or not at all); False, and no file, when some rows are
    out of that order or a source's row groups cannot be told apart by model or joined
    exactly (the caller orders the rows in memory)."""
    def fill(joiner: RowGroupJoiner) -> bool:
        plan = _joined_groups(joiner, sources, arrow_text(task_ids), models)
        if plan is None:
            return False
        for checked, groups in plan:
            joiner.add_groups(*checked, groups)
        return True

    return _write_joined(path, fill)


def _joined_groups(joiner: RowGroupJoiner, sources: list[Path], ids: pa.Array,
                   models: list[str]) -> list[tuple[tuple, list[int]]] | None:
    """For :func:`join_tables`: (a source as ``joiner.check`` splits it, its row groups to
    copy) in the order to copy them; None when they cannot be joined in order."""
    opened = []
    for source in sources:
        try:
            opened.append((source, joiner.check(source), pq.read_metadata(source)))
        except JoinError:
            return None
    plan = []
    for model in models:
        last = -1  # the position in ``ids`` of the model's last row so far
        for source, checked, meta in opened:
            groups = model_row_groups(meta, model)
            if groups is None:
                return None
            if not groups:
                continue
            with pq.ParquetFile(source, metadata=meta) as file:  # (its footer read once)
                got = file.read_row_groups(groups, columns=["task_id"]).column(0)
            if ids.slice(last + 1, len(got)).equals(got.combine_chunks()):
                last += len(got)  # the next tasks, every one (the usual case): no look-up
            else:
                at = positions(got, ids)
                if (at < 0).any() or at[0] <= last or (np.diff(at) <= 0).any():
                    return None
                last = int(at[-1])
            plan.append((checked, groups))
    return plan


def ordered_table(table: pa.Table, task_ids, models: list[str]) -> pa.Table:
    """Rows of the listed tasks and models, by model (as listed) then task (as listed); of
    rows repeating a (task, model), the last written wins."""
    if _in_order(table, task_ids, models):
        return table  # the usual case (each model's rows appended whole, in task order)
    task = positions(table.column("task_id"), task_ids)
    model = positions(table.column("model"), models)
    known = (task >= 0) & (model >= 0)
    key = np.where(known, model * len(task_ids) + task, -1)
    rows = np.flatnonzero(known)
    order = rows[np.lexsort((rows, key[rows]))]
    last = np.r_[key[order][1:] != key[order][:-1], True] if len(order) else np.empty(0, bool)
    take = order[last]
    if len(take) == table.num_rows and (take == np.arange(len(take))).all():
        return table  # already in order (the usual case): no copy
    return table.take(pa.array(take))


def _in_order(table: pa.Table, task_ids, models: list[str]) -> bool:
    """Whether ``table`` is, exactly, each model's rows for ``task_ids`` in turn."""
    n = len(task_ids)
    if table.num_rows != n * len(models) or n == 0:
        return False
    ids = arrow_text(task_ids)
    return all(_rows_are(table.slice(i * n, n), model, ids) for i, model in enumerate(models))


def _rows_are(table: pa.Table, model: str, ids: pa.Array) -> bool:
    """Whether ``table`` holds exactly ``model``'s rows for ``ids``, in that order."""
    return (table.num_rows == len(ids) > 0
            and bool(pc.all(pc.equal(table.column("model"), model)).as_py())
            and table.column("task_id").combine_chunks().equals(ids))
