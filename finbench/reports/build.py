"""``finbench report`` and ``finbench paper``: tables and figures from stored runs only."""

from __future__ import annotations

from pathlib import Path

from finbench.core.errors import RunError
from finbench.reports.receipt import report_files, write_receipt
from finbench.runlog.rundir import (
    INPUTS,
    MANIFEST,
    SCORED,
    check_recorded,
    finished_run,
    load_run_config,
    run_labels,
)
from finbench.runlog.runlock import RunLock
from finbench.tracks import get_track, list_tracks, plugin_of


def report(run_dir: str | Path) -> tuple[list[Path], list[Path]]:
    """Tables into ``RUN/tables``, figures into ``RUN/figures``, and ``RUN/report.html``
    (all of them on one self-contained page, with a per-sample browser), the files of an
    earlier report replaced, and their receipt ``RUN/report.json``
    (:mod:`finbench.reports.receipt`)."""
    run_dir = finished_run(run_dir)
    with RunLock(run_dir, command=f"finbench report {run_dir}"):
        check_recorded(run_dir, INPUTS + SCORED)
        for rel in report_files(run_dir):  # a file of an earlier report is drawn again or gone
            (run_dir / rel).unlink()
        tables, figs = plugin_of(load_run_config(run_dir)).report(run_dir)
        write_receipt(run_dir)
    figs.check()
    return tables, figs.paths


def paper(run_dirs: list[str | Path], out: str | Path = "paper", *,
          allow_different_tasks: bool = False, echo=print) -> list[Path]:
    """Regenerate ``out/tables`` and ``out/figures`` from one or more runs.

    With several runs, models are named after their run folder (with parent folders where
    two runs' folders share a name), and each model's skill is computed within its own run,
    on its own run's paired rows. Runs whose task sets differ are refused (models side by
    side would be scored on different tasks) unless ``allow_different_tasks``, which prints
    how the task sets overlap.
    """
    if (Path(out) / MANIFEST).is_file():
        raise RunError(f"{out}: is a run directory, whose tables/ and figures/ are its own "
                       "report's; the paper's go into a folder of their own (default: paper)")
    labels = run_labels(run_dirs)
    tracks = [plugin_of(load_run_config(finished_run(r))) for r in run_dirs]
    for r, track in zip(run_dirs, tracks, strict=True):
        if not track.in_paper:
            pooled_tracks = [t for t in list_tracks() if get_track(t).in_paper]
            raise RunError(f"{r}: a run of track {track.name!r}; `finbench paper` pools runs "
                           f"of track {', '.join(map(repr, pooled_tracks))} (its tables: "
                           "`finbench report`)")
        if track.name != tracks[0].name:
            raise RunError(f"{r}: a run of track {track.name!r}, {run_dirs[0]} of "
                           f"{tracks[0].name!r}: a paper's tables pool runs of one track")
    return tracks[0].paper(run_dirs, labels, Path(out),
                           allow_different_tasks=allow_different_tasks, echo=echo)


