"""What a finished run directory holds (SPEC §9), checked before a command reads one."""

from __future__ import annotations

from pathlib import Path

from finbench.errors import RunError

MANIFEST = "manifest.json"
FINISHED = (MANIFEST, "tasks.parquet", "labels.parquet", "forecasts.parquet")


def finished_run(run_dir: str | Path) -> Path:
    """``run_dir`` as a Path, once it holds every file a finished run writes; else a RunError
    naming the folder and what it lacks."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunError(f"{run_dir}: no such run directory")
    missing = [f for f in FINISHED if not (run_dir / f).is_file()]
    if missing:
        hint = ("; a run still waiting for its batches, or stopped before its end, writes "
                "them when the same `finbench run` command is given again"
                if (run_dir / MANIFEST).is_file() else "")
        raise RunError(f"{run_dir}: not a finished run (missing {', '.join(missing)}){hint}")
    return run_dir


def run_labels(run_dirs: list[str | Path]) -> list[str]:
    """A distinct label per run: its folder name, or as many trailing path parts as it takes
    to tell runs apart (``a/pilot``, ``b/pilot``). The same folder given twice is an error."""
    paths = [Path(r).resolve() for r in run_dirs]
    for i, path in enumerate(paths):
        if path in paths[:i]:
            raise RunError(f"{run_dirs[i]}: the same run is given twice")
    depth = 1
    while len({"/".join(p.parts[-depth:]) for p in paths}) < len(paths):
        depth += 1
    return ["/".join(p.parts[-depth:]) for p in paths]
