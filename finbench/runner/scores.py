"""Scoring a run again, whatever its track: ``finbench score`` and the last steps of ``run`` and
``merge`` ask the run's track (:meth:`~finbench.tracks.base.TrackPlugin.score`) for every
score file, from the stored forecasts, labels and tasks alone."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from finbench.runlog.rundir import INPUTS, check_recorded, finished_run, load_run_config, read_manifest
from finbench.runlog.runlock import RunLock
from finbench.runner.canonical import canonical_pieces
from finbench.tracks import plugin_of


def score_run(run_dir: str | Path) -> pd.DataFrame:
    """Recompute every score from the stored forecasts, labels and tasks alone (holding the
    run directory's lock) and write the track's score files; the main scores table returned."""
    run_dir = finished_run(run_dir, scored=False)  # it writes the score outputs again
    with RunLock(run_dir, command=f"finbench score {run_dir}"):
        check_recorded(run_dir, INPUTS)
        return rescore(run_dir)


def rescore(run_dir: Path, inputs=None) -> pd.DataFrame:
    """:func:`score_run` for a caller that holds the run directory's lock; the content hashes
    of the files written are recorded in the manifest. ``inputs``: what the track's
    :meth:`~finbench.tracks.base.TrackPlugin.score_inputs` read already, if anything."""
    run_dir = finished_run(run_dir, scored=False)
    config = load_run_config(run_dir)
    skipped = read_manifest(run_dir).get("skipped_models", {})
    return plugin_of(config).score(Path(run_dir), config, skipped=skipped, inputs=inputs)


def canonical_tables(run_dir: str | Path) -> str:
    """The canonical JSON of a run's score tables (its track's
    :attr:`~finbench.tracks.base.TrackPlugin.score_files` held as Parquet), sorted by name:
    each table's columns and rows in file order, floats rounded to
    :data:`~finbench.runner.canonical.DIGITS` decimal places, NaN and missing as null, other
    values as text (:mod:`finbench.runner.canonical`)."""
    return "".join(canonical_pieces(_score_tables(run_dir)))


def score_digest(run_dir: str | Path) -> str:
    """SHA-256 of :func:`canonical_tables`, hashed piece by piece: two runs whose score
    tables agree to :data:`~finbench.runner.canonical.DIGITS` places have the same digest
    (docs/spec.md, "Versions and digests")."""
    import hashlib

    digest = hashlib.sha256()
    for piece in canonical_pieces(_score_tables(run_dir)):
        digest.update(piece.encode())
    return digest.hexdigest()


def _score_tables(run_dir: str | Path) -> dict[str, Path]:
    """The run's score tables held as Parquet: name, file."""
    run_dir = Path(run_dir)
    track = plugin_of(load_run_config(run_dir))
    return {name: run_dir / name for name in track.score_files
            if name.endswith(".parquet") and (run_dir / name).is_file()}
