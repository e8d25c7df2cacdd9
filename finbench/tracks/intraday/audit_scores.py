"""The intraday run's scores computed again from its stored forecasts, labels and tasks and
compared with its score files, a model's rows at a time; each CSV written again from its
Parquet file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from finbench.audit.scores import ATOL, RTOL, SHOWN, first_difference, frame_problems
from finbench.core.errors import RunError
from finbench.core.lookup import same_values
from finbench.tracks.intraday.scores import RunScores, rows_parquet_writer, scores_csv


def score_problems(run_dir: Path) -> list[str]:
    """Differences between the stored scores (table and per-row export) and the scores the
    stored forecasts and labels give."""
    run_dir = Path(run_dir)
    scores = RunScores(run_dir)
    problems: list[str] = []
    stored_rows = run_dir / "rows.parquet"
    try:
        if not stored_rows.is_file():
            for _ in scores.models():  # (the scores table is tallied as they come)
                pass
        elif not _written_as_stored(scores, stored_rows):
            scores = RunScores(run_dir)  # (the first went through its models)
            problems += _rows_problems(scores, pq.ParquetFile(stored_rows))
    except RunError as exc:  # e.g. a row of no task of the run (named by the row checks)
        return [*problems, f"scores cannot be computed again: {exc}"]
    if not stored_rows.is_file() and scores.names:  # (three-class models alone: none)
        problems.append("rows.parquet: missing (the per-row scores of the run)")
    stored = run_dir / "scores.parquet"
    if not stored.is_file():
        return [*problems, "scores.parquet: missing"]
    problems += frame_problems(pd.read_parquet(stored), scores.table(), "scores.parquet",
                                key=["model", "slice_kind", "slice"])
    return problems + _class_problems(run_dir, scores)


def _rows_problems(scores: RunScores, stored: pq.ParquetFile) -> list[str]:
    """Each model's rows computed again against ``rows.parquet``'s, a row group at a time,
    every difference named."""
    problems: list[str] = []
    groups = _model_groups(stored)
    for name, _, table in scores.models():
        start = 0
        for g in groups.get(name, []):
            have = stored.read_row_group(g)
            problems += _table_problems(have, table.slice(start, have.num_rows),
                                        f"rows.parquet (model {name})")
            start += have.num_rows
        if start != table.num_rows:
            problems.append(f"rows.parquet (model {name}): {start} rows; the stored "
                            f"forecasts and labels give {table.num_rows}")
    return problems


def _written_as_stored(scores: RunScores, path: Path) -> bool:
    """Whether every model's rows computed again (:meth:`RunScores.models`, which it goes
    through), written as the run writes them (the options of
    :class:`~finbench.tracks.intraday.scores.RowWriter`, a model's rows at a time), give
    ``path``'s bytes exactly: then the stored rows are those rows, and no row need be read
    back (a year's 1.49M rows: 2.6 s read and compared, 1.5 s written again). Any other file
    (an edit, another pyarrow's writer) is compared row by row."""
    sink, writer = pa.BufferOutputStream(), None
    for _, _, table in scores.models():
        if writer is None:
            writer = rows_parquet_writer(sink, table)
        writer.write_table(table.cast(writer.schema))
    if writer is None:
        return False
    writer.close()
    written = sink.getvalue()
    return path.stat().st_size == written.size and written.equals(
        pa.py_buffer(path.read_bytes()))


def _class_problems(run_dir: Path, scores: RunScores) -> list[str]:
    """The three-class scores and rows as stored against those computed again."""
    try:
        classes, rows3 = scores.class_tables()
    except RunError as exc:  # a class no label pass gives (the labels' checks name it too)
        return [f"three-class scores cannot be computed again: {exc}"]
    problems = []
    for name, table, key in (("scores3.parquet", classes, ["model", "slice_kind", "slice"]),
                             ("rows3.parquet", rows3, ["task_id", "model"])):
        stored = run_dir / name
        if classes.empty and stored.is_file():
            problems.append(f"{name}: three-class scores of a run without three-class models")
        elif not classes.empty and not stored.is_file():
            problems.append(f"{name}: missing (the run has three-class models)")
        elif not classes.empty:
            problems += frame_problems(pd.read_parquet(stored), table, name, key=key)
    return problems


CSV_OF = {"scores.csv": "scores.parquet", "scores3.csv": "scores3.parquet",
          "rows.csv": "rows.parquet", "rows3.csv": "rows3.parquet"}


def csv_problems(run_dir: Path) -> list[str]:
    """Each CSV of the scores against the CSV its Parquet file gives (written by the same
    writer: the same bytes), so an edit of a CSV is found whatever hash it was given (the
    Parquet files are compared with the scores computed again)."""
    run_dir, problems = Path(run_dir), []
    for csv, parquet in CSV_OF.items():
        if not (run_dir / csv).is_file():
            continue
        if not (run_dir / parquet).is_file():
            problems.append(f"{csv}: there is no {parquet} it would be the CSV of")
            continue
        try:
            want = (_rows_csv(run_dir / parquet) if csv == "rows.csv"
                    else [scores_csv(pd.read_parquet(run_dir / parquet)).encode()])
        except (OSError, ValueError, pa.ArrowException):  # a torn file: named by its hash
            continue
        problems += first_difference(run_dir / csv, want, f"{csv}: not the CSV of {parquet}")
    return problems


def _rows_csv(path: Path):
    """``rows.csv`` as the run writes it from the rows of ``rows.parquet``, a row group at a
    time (the header with the first)."""
    parquet = pq.ParquetFile(path)
    for g in range(parquet.metadata.num_row_groups):
        table = parquet.read_row_group(g)
        out = pa.BufferOutputStream()
        pacsv.write_csv(table, out, pacsv.WriteOptions(include_header=g == 0))
        yield out.getvalue().to_pybytes()


def _model_groups(parquet: pq.ParquetFile) -> dict[str, list[int]]:
    """The row groups of each model in a per-row scores file (written model by model, each
    row group of one model); a row group mixing models is listed under each of them."""
    out: dict[str, list[int]] = {}
    for g in range(parquet.metadata.num_row_groups):
        models = pc.unique(parquet.read_row_group(g, columns=["model"]).column("model"))
        for name in models.to_pylist():
            out.setdefault(name, []).append(g)
    return out


def _table_problems(have: pa.Table, want: pa.Table, what: str) -> list[str]:
    """Per-row scores as stored against the same rows computed again (the export writes a
    model's rows in task order, so row for row), column by column in Arrow; values are shown
    only for the cells that differ."""
    if have.num_rows != want.num_rows or not have.column("task_id").equals(
            want.column("task_id")):
        return frame_problems(have.to_pandas(), want.to_pandas(), what, key=["task_id"])
    problems = [f"{what}: column {c} is missing" for c in want.column_names
                if c not in have.column_names]
    ids = want.column("task_id")
    for col in [c for c in want.column_names if c in have.column_names]:
        a, b = have.column(col).combine_chunks(), want.column(col).combine_chunks()
        if pa.types.is_floating(b.type) or pa.types.is_integer(b.type):
            u = a.to_numpy(zero_copy_only=False).astype(float)
            v = b.to_numpy(zero_copy_only=False).astype(float)
            same = np.isclose(u, v, rtol=RTOL, atol=ATOL) | (np.isnan(u) & np.isnan(v))
        else:
            same = same_values(a, b)
        bad = np.flatnonzero(~np.asarray(same, bool))
        for i in bad[:SHOWN]:
            problems.append(f"{what}: row {ids[int(i)].as_py()}, {col} is {a[int(i)].as_py()!r}; "
                            f"the stored forecasts and labels give {b[int(i)].as_py()!r}")
        if len(bad) > SHOWN:
            problems.append(f"... and {len(bad) - SHOWN} more rows of {what} differ in {col}")
    return problems
