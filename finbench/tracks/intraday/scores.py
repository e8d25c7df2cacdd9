"""Every score of a run, from its stored forecasts, labels and tasks alone: ``scores.*`` (one
row per model and slice) and the per-row export ``rows.*``, computed one model at a time.
``finbench run``, ``score`` and ``merge`` write them; ``finbench audit`` recomputes them and
compares."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from finbench.core.errors import RunError
from finbench.core.lookup import arrow_text, positions, take
from finbench.core.outputs import (
    DiskFullError,
    disk_full_message,
    formatted_floats,
    out_of_space,
    write_atomic,
)
from finbench.runlog import forecast_table
from finbench.runlog.costs import cost_arrays, needs_detail, prices_of
from finbench.runlog.rundir import (
    finished_run,
    load_run_config,
    read_manifest,
    record_files,
)
from finbench.tracks.intraday.config import (
    baseline_names,
    binary_names,
    interval_reference,
    knowledge_cutoffs,
)
from finbench.tracks.intraday.score_cells import SCORED_COLUMNS, Tally, row_scores
from finbench.tracks.intraday.score_rows import Reference, row_table, task_text
from finbench.tracks.intraday.scores3 import class_scores

THREE_CLASS_FILES = ("scores3.parquet", "scores3.csv", "rows3.parquet", "rows3.csv")
SCORE_FILES = ("scores.parquet", "scores.csv", "rows.parquet", "rows.csv", *THREE_CLASS_FILES)


class TaskInputs:
    """What scoring reads of a run's tasks and labels (``tasks.parquet``, ``labels.parquet``)
    before any forecast: the two frames, the task ids as Arrow text, and the export's task
    and label texts. A run reads them while its last journal parts are written."""

    def __init__(self, run_dir: Path) -> None:
        self.tasks = pd.read_parquet(Path(run_dir) / "tasks.parquet")
        self.labels = pd.read_parquet(Path(run_dir) / "labels.parquet")
        self.task_ids = arrow_text(self.tasks["task_id"])
        self.labels_in_task_order = arrow_text(self.labels["task_id"]).equals(self.task_ids)
        # the export's task and label texts, encoded once for every model's rows
        self.text = task_text(self.tasks, self.labels["status"] if self.labels_in_task_order
                              else take(self.labels["status"],
                                        positions(self.task_ids, self.labels["task_id"])))


class RunScores:
    """A run's scores, model by model: :meth:`models` yields each model's scored rows and
    their export table; :meth:`table` is the scores table of every model added to
    :attr:`tally`. ``inputs``: its :class:`TaskInputs`, when already read."""

    def __init__(self, run_dir: Path, inputs: TaskInputs | None = None) -> None:
        self.dir = finished_run(run_dir, scored=False)
        self.config = load_run_config(self.dir)
        skipped = read_manifest(self.dir).get("skipped_models", {})
        inputs = inputs if inputs is not None else TaskInputs(self.dir)
        self.tasks, self.labels = inputs.tasks, inputs.labels
        self.skipped = skipped
        # the binary question's models (three-class ones: :meth:`class_table`)
        self.names = [n for n in binary_names(self.config) if n not in skipped]
        self.baselines = [b for b in baseline_names(self.config) if b not in skipped]
        policy = self.config.invalid_policy
        self.fallback = policy.split(":", 1)[1] if policy.startswith("fallback:") else None
        self.path = self.dir / "forecasts.parquet"
        # the fallback baseline's rows: every model's reference, and its own answers (read once)
        self._fallback_rows = (forecast_table.model_rows(self.path, self.fallback,
                                                         list(SCORED_COLUMNS))
                               if self.fallback else None)
        self.reference = (self._fallback_rows.to_pandas() if self._fallback_rows is not None
                          else None)
        self.interval_reference = interval_reference(self.config)
        self.cutoffs = knowledge_cutoffs(self.config)
        self.tally = Tally(self.tasks[["ticker", "horizon", "session"]], models=self.names,
                           baselines=self.baselines, interval_reference=self.interval_reference)
        self._task_ids = inputs.task_ids
        self._labels_in_task_order = inputs.labels_in_task_order
        self._read: dict[str, pa.Table] = {}  # a baseline's rows, read for its reference
        self._y_r: tuple[np.ndarray, np.ndarray] | None = None  # :meth:`_outcomes`
        self._text = inputs.text

    def scored(self, name: str) -> pd.DataFrame:
        """One model's forecast rows with labels and per-row scores."""
        config = self.config
        if name == self.fallback:
            forecasts = self.reference
        else:  # a baseline's rows were read for its reference: not read twice
            read = self._read.pop(name, None)
            if read is None:
                forecasts = model_rows(self.path, name)
            else:
                if "task_id" not in read.column_names:  # its rows are the tasks, in order
                    read = read.add_column(0, "task_id", self._task_ids).add_column(
                        1, "model", pa.repeat(pa.scalar(name, pa.string()), read.num_rows))
                forecasts = read.select(list(SCORED_COLUMNS)).to_pandas()
        rows = row_scores(forecasts, self.labels, self.tasks, invalid_policy=config.invalid_policy,
                          clip=config.scores.log_loss_clip, alpha=config.scores.alpha,
                          reference=self.reference)
        stray = np.flatnonzero(rows["task_row"].to_numpy() < 0)
        if len(stray):
            raise RunError(f"{self.path}: model {name} has a row for "
                           f"{rows['task_id'].iloc[stray[0]]}, which is not a task of the run "
                           "(tasks.parquet)")
        return rows

    def baseline_answers(self, name: str) -> Reference:
        """A baseline's answer and scores per task. Its rows (the scored columns, as Arrow)
        are kept for :meth:`scored`, which then reads them no more."""
        table = (self._fallback_rows if name == self.fallback
                 else forecast_table.model_rows(self.path, name, list(SCORED_COLUMNS)))
        ids = table.column("task_id").combine_chunks()
        in_task_order = ids.equals(self._task_ids)
        at = np.arange(len(ids)) if in_task_order else positions(ids, self._task_ids)
        if name in self.names and name != self.fallback:
            # kept without the texts the run's tasks and the name give again (five years of
            # a baseline's task ids: 52 MB)
            self._read[name] = (table.drop_columns(["task_id", "model"]) if in_task_order
                                else table)
        y, r = self._outcomes()
        column = {c: table.column(c).to_numpy() for c in ("p_up", "lower", "upper", "valid")}
        return Reference(at, column["p_up"], column["lower"], column["upper"], column["valid"],
                         y, r, len(self.tasks), alpha=self.config.scores.alpha)

    def _outcomes(self) -> tuple[np.ndarray, np.ndarray]:
        """(y, r) per task, NaN where the label is not ``ok`` (made once, read by every
        baseline's :class:`Reference`)."""
        if not self._labels_in_task_order:
            raise RunError(f"{self.dir}: labels.parquet is not in the order of tasks.parquet")
        if self._y_r is None:
            status_ok = (self.labels["status"] == "ok").to_numpy(bool)
            self._y_r = (np.where(status_ok, self.labels["y"].astype("float64").to_numpy(),
                                  np.nan),
                         np.where(status_ok, self.labels["r"].to_numpy(float), np.nan))
        return self._y_r

    def models(self) -> Iterator[tuple[str, pd.DataFrame, pa.Table]]:
        """(name, scored rows, export table) per model, in the config's order; each model's
        rows are added to :attr:`tally` as they come (one model's rows in memory at a time)."""
        # each baseline's answers per task, for the export's columns
        references = {b: self.baseline_answers(b) for b in self.baselines}
        for name in self.names:
            rows = self.scored(name)
            self.tally.add(name, rows.assign(task_code=rows["task_row"]))
            yield name, rows, row_table(name, rows, references, self.interval_reference,
                                        self._text, self.cutoffs.get(name),
                                        self.costs(name, len(rows)))

    def costs(self, name: str, n: int) -> dict[str, pa.Array]:
        """What each of a model's ``n`` rows cost (:mod:`finbench.runlog.costs`), in the
        order of its rows in the forecast table (the order :meth:`scored` keeps)."""
        model = next(m for m in self.config.models if m.name == name)
        if not needs_detail(model.kind):
            return cost_arrays(model.kind, n)
        read = forecast_table.model_rows(self.path, name, ["detail", "tokens"])
        return cost_arrays(model.kind, n, read.column("detail").to_pylist(),
                           read.column("tokens").to_pylist(), prices_of(model))

    def class_tables(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The three-class scores and their rows (:mod:`finbench.tracks.intraday.scores3`); empty
        without such models."""
        return class_scores(self.config, self.path, self.labels, self.tasks, self.skipped)

    def table(self) -> pd.DataFrame:
        if not self.names:  # three-class models alone: no binary scores
            return pd.DataFrame({"model": pd.Series([], dtype=object),
                                 "slice_kind": pd.Series([], dtype=object),
                                 "slice": pd.Series([], dtype=object)})
        return self.tally.table(composite=self.config.scores.composite,
                                horizon_order=list(self.config.tasks.horizons))


def model_rows(path: Path, model: str) -> pd.DataFrame:
    """The scored columns of one model's rows of a forecast table, in file order."""
    return forecast_table.model_rows(path, model, list(SCORED_COLUMNS)).to_pandas()


def rescore(run_dir: Path, inputs: TaskInputs | None = None) -> pd.DataFrame:
    """Every score of a finished intraday run from its stored forecasts, labels and tasks, for
    a caller that holds the run directory's lock (:func:`finbench.runner.scores.score_run`);
    the content hashes of the files written are recorded in the manifest. ``inputs``: the
    run's :class:`TaskInputs`, when already read."""
    scores = RunScores(run_dir, inputs)
    run_dir = scores.dir
    with RowWriter(run_dir, csv=rows_csv_wanted(scores.config, len(scores.tasks))) as export:
        for _, _, table in scores.models():
            export.add(table)
        # the scores tables, while the writer threads write the last model's rows
        table = scores.table()
        write_atomic(run_dir / "scores.parquet", lambda p: table.to_parquet(p, index=False))
        write_atomic(run_dir / "scores.csv", lambda p: Path(p).write_text(scores_csv(table)))
        classes, rows3 = scores.class_tables()
        for name in THREE_CLASS_FILES:
            (run_dir / name).unlink(missing_ok=True)  # a run without three-class models: none
        if not classes.empty:
            write_atomic(run_dir / "scores3.parquet",
                         lambda p: classes.to_parquet(p, index=False))
            write_atomic(run_dir / "scores3.csv",
                         lambda p: Path(p).write_text(scores_csv(classes)))
            write_atomic(run_dir / "rows3.parquet", lambda p: rows3.to_parquet(p, index=False))
            if rows_csv_wanted(scores.config, len(scores.tasks)):
                write_atomic(run_dir / "rows3.csv",
                             lambda p: Path(p).write_text(scores_csv(rows3)))
    record_files(run_dir, read_manifest(run_dir),
                 [n for n in SCORE_FILES if (run_dir / n).is_file()])
    return table


def scores_csv(table: pd.DataFrame) -> str:
    """The text of ``scores.csv`` (or ``scores3.csv``) of a scores table: its floats to 12
    significant digits (the Parquet file holds them whole)."""
    return formatted_floats(table, "%.12g").to_csv(index=False)


SPREADSHEET_ROWS = 1_048_576  # the most rows a sheet of Excel or LibreOffice Calc holds


def rows_csv_wanted(config, tasks: int) -> bool:
    """Whether ``rows.csv`` is written: ``[scores] rows_csv`` when true or false; with "auto",
    when the run's rows (tasks x binary models, an upper bound) and a header line fit a
    spreadsheet (a CSV is for opening in one; ``rows.parquet`` holds the same rows)."""
    wanted = config.scores.rows_csv
    if wanted != "auto":
        return bool(wanted)
    return tasks * len(binary_names(config)) < SPREADSHEET_ROWS


# rows.parquet: statistics (per row group: a model's rows) only for the columns a reader
# selects rows by; dictionaries for the columns whose values repeat (not ids, returns and the
# interval's own numbers). Min and max of every float and text column were a quarter of the
# file's encoding, and dictionaries of row-unique values are built only to be dropped.
_ROWS_KEYS = ("task_id", "model", "ticker", "session", "horizon", "status")
_ROWS_UNIQUE = ("task_id", "r", "lower", "upper", "winkler", "width")


def rows_parquet_writer(where, table: pa.Table) -> pq.ParquetWriter:
    """The writer of ``rows.parquet`` (at ``where``: a path or a sink) for tables of
    ``table``'s columns (each cast to the writer's schema before it is written): how the run
    writes the file, and the audit again to compare its bytes."""
    return pq.ParquetWriter(where, table.schema, **rows_options(table))


def rows_options(table: pa.Table) -> dict:
    """The Parquet writer's options of ``rows.parquet`` for tables of ``table``'s columns."""
    names = table.schema.names
    # no Arrow schema stored: text given as codes and their texts (:func:`row_table`) is read
    # back as text, as the same text given plain is (every other type is Parquet's own)
    return {"compression": "zstd", "store_schema": False,
            "write_statistics": [c for c in _ROWS_KEYS if c in names],
            "use_dictionary": [c for c in names if c not in _ROWS_UNIQUE]}


class RowWriter:
    """``rows.parquet`` and (with ``csv``) ``rows.csv``, written a model's rows at a time, each
    file on a writer thread of its own (the caller scores the next model meanwhile; at most
    two tables wait) under temporary names, renamed into place when every model is in: never
    half a file under the name. Without ``csv``, an old ``rows.csv`` is removed."""

    def __init__(self, run_dir: Path, *, csv: bool = True) -> None:
        self.final = [run_dir / "rows.parquet", *([run_dir / "rows.csv"] if csv else [])]
        self.stale = [] if csv else [run_dir / "rows.csv"]
        self.tmp = [p.with_name(p.name + ".tmp") for p in self.final]
        self.writers: list | None = None
        self.pools = [ThreadPoolExecutor(max_workers=1, thread_name_prefix="rows")
                      for _ in self.final]
        self.pending: list = []

    def add(self, table: pa.Table) -> None:
        while len(self.pending) >= 2 * len(self.pools):
            k, future = self.pending.pop(0)
            error = future.exception()
            if error is not None:
                raise self._named(k, error)
        if self.writers is None:
            self.writers = [rows_parquet_writer(self.tmp[0], table),
                            *(pacsv.CSVWriter(p, table.schema) for p in self.tmp[1:])]
        table = table.cast(self.writers[0].schema)
        self.pending += [(k, pool.submit(writer.write_table, table))
                         for k, (pool, writer) in enumerate(zip(self.pools, self.writers,
                                                                strict=True))]

    def __enter__(self) -> RowWriter:
        return self

    def _named(self, k: int, error: BaseException) -> BaseException:
        """A writer's error; out of space, one naming its file."""
        if out_of_space(error):
            return DiskFullError(disk_full_message(self.final[k], self.tmp[k], error))
        return error

    def __exit__(self, kind, error, trace) -> None:
        errors = [self._named(k, e) for k, e in ((k, f.exception()) for k, f in self.pending)
                  if e is not None]
        for pool in self.pools:
            pool.shutdown()
        for k, writer in enumerate(self.writers or []):
            try:
                writer.close()
            except Exception as late:
                errors.append(self._named(k, late))
        done = kind is None and not errors and self.writers is not None
        for tmp, final in zip(self.tmp, self.final, strict=True):
            if done:
                os.replace(tmp, final)
            else:
                tmp.unlink(missing_ok=True)
        if done:
            for path in self.stale:
                path.unlink(missing_ok=True)
        if kind is None and errors:  # a caller already failing keeps its own error
            raise errors[0]


