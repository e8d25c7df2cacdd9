"""The report's receipt, ``report.json`` in the run directory: every file ``finbench report``
wrote (``tables/``, ``figures/``, ``report.html``) with its SHA-256, the run's manifest it was
made from, the name of the run's folder then (the page's title: a run copied under another
name keeps its report) and what made it (FinBench, matplotlib), so the audit can tell an
edited report from one drawn again."""

from __future__ import annotations

from pathlib import Path

from finbench.core.outputs import write_json
from finbench.core.version import code_version
from finbench.data.store import sha256_file
from finbench.runlog.rundir import MANIFEST

REPORT = "report.json"
FORMAT = "finbench-report"
FOLDERS = ("tables", "figures")
PAGE = "report.html"


def report_files(run_dir: Path) -> list[str]:
    """The report files in ``run_dir`` (relative paths, sorted): everything under its
    ``tables/`` and ``figures/`` folders, and ``report.html``."""
    run_dir = Path(run_dir)
    found = [p.relative_to(run_dir).as_posix() for folder in FOLDERS
             if (run_dir / folder).is_dir() for p in (run_dir / folder).rglob("*")
             if p.is_file()]
    if (run_dir / PAGE).is_file():
        found.append(PAGE)
    return sorted(found)


def drawn_by() -> dict:
    """What draws a report here: this FinBench and matplotlib (whose version decides the
    figures' bytes)."""
    import matplotlib

    return {**code_version(), "matplotlib": matplotlib.__version__}


def write_receipt(run_dir: Path) -> Path:
    """``report.json`` for the report files now in ``run_dir``; its path."""
    run_dir = Path(run_dir)
    files = {rel: sha256_file(run_dir / rel) for rel in report_files(run_dir)}
    path = run_dir / REPORT
    write_json(path, {"format": FORMAT, "version": 1, **drawn_by(),
                      "manifest_sha256": sha256_file(run_dir / MANIFEST),
                      "folder": run_dir.name, "files": files})
    return path
