"""What a run directory holds (docs/spec.md §9): the files a finished run has, the content hashes the
run records of them in its manifest, and atomic writes of its JSON."""

from __future__ import annotations

import datetime as dt
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from finbench.core.errors import RunError
from finbench.core.location import is_uri
from finbench.core.outputs import write_json
from finbench.data.store import sha256_file
from finbench.runlog.rows import FORECAST_COLUMNS
from finbench.tracks.configs import validated

MANIFEST = "manifest.json"
RUN_FORMAT = "finbench-run"  # the manifest's "format" (a store's says "finbench-store")
FINISHED = (MANIFEST, "tasks.parquet", "labels.parquet", "forecasts.parquet")
# the files of a run whose content hashes its manifest records ("files"), beside the journal
RECORDED = ("tasks.parquet", "labels.parquet", "forecasts.parquet", "scores.parquet",
            "scores.csv", "rows.parquet", "rows.csv", "journal.jsonl", "stances.jsonl",
            "scores3.parquet", "scores3.csv", "rows3.parquet", "rows3.csv",
            # the declared slices' values (both tracks, with [[slices]]); the recall probes'
            # answers (with recall_probe)
            "slices.parquet", "probes.parquet", "min_k.parquet",
            # the event track's
            "retrieval.parquet", "skill.parquet", "skill.csv", "exclusions.csv",
            "market_gap.csv")
PARTS = "journal.parts"
# what every score of a run is derived from, and what the score step derives (`finbench score`
# writes these again); the commands that read a run check the files they read against the
# hashes its manifest records (:func:`check_recorded`)
INPUTS = ("tasks.parquet", "labels.parquet", "forecasts.parquet", "stances.jsonl")
SLICES = "slices.parquet"  # each task's value in each declared slice (the report reads it)
PROBES = "probes.parquet"  # the recall probes' answers (docs/spec.md §15)
PROBE_FOLDER = "probes"  # their journal and transcripts
MIN_K = "min_k.parquet"  # each task's text scored by its model's token log-probabilities
SCORED = ("scores.parquet", "scores3.parquet", "rows.parquet", "skill.parquet",
          "exclusions.csv", "market_gap.csv")


# what scoring writes (``finbench score`` mends a torn one, so it does not check them)
SCORE_OUTPUTS = ("scores.parquet", "rows.parquet", "scores3.parquet", "rows3.parquet",
                 "skill.parquet")


def finished_run(run_dir: str | Path, *, scored: bool = True) -> Path:
    """``run_dir`` as a Path, once it holds every file a finished run writes, each Parquet
    file readable (``scored=False``: the score outputs left unchecked, for the command that
    writes them again); else a RunError naming the folder and what it lacks."""
    if is_uri(run_dir):
        raise RunError(f"{run_dir}: a run on object storage is read from a local copy: "
                       f"finbench data copy {run_dir} LOCAL_FOLDER")
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunError(f"{run_dir}: no such run directory")
    missing = [f for f in FINISHED if not (run_dir / f).is_file()]
    if missing:
        hint = ("; a run still waiting for its batches, or stopped before its end, writes "
                "them when the same `finbench run` command is given again"
                if (run_dir / MANIFEST).is_file() else "")
        raise RunError(f"{run_dir}: not a finished run (missing {', '.join(missing)}){hint}")
    optional = ("retrieval.parquet", SLICES, *(SCORE_OUTPUTS if scored else ()))
    for name in [f for f in FINISHED if f.endswith(".parquet")] + [
            f for f in optional if (run_dir / f).is_file()]:
        try:
            pq.read_metadata(run_dir / name)
        except (pa.ArrowInvalid, OSError) as exc:
            raise RunError(f"{run_dir / name}: cannot be read ({exc}); the file is torn or not "
                           "Parquet: the same `finbench run` on this folder writes it again "
                           "(scores and rows: `finbench score`)") from None
    names = pq.read_schema(run_dir / "forecasts.parquet").names
    lacking = [c for c in FORECAST_COLUMNS if c not in names]
    if lacking:
        raise RunError(f"{run_dir / 'forecasts.parquet'}: has no column {', '.join(lacking)}: the "
                       "run was made by an older FinBench (CHANGELOG.md says what changed); run "
                       "its config again into a new directory")
    read_manifest(run_dir)
    return run_dir


def check_recorded(run_dir: Path, names) -> None:
    """Refuse (RunError) a run whose files ``names`` (those it holds) are not the ones its
    manifest records: changed after the run wrote them, or written by a run stopped before it
    recorded them. Numbers a command prints or writes then always come from the files the
    audit vouches for. The audit itself lists every such file instead (``hash_problems``)."""
    run_dir = Path(run_dir)
    recorded = read_manifest(run_dir).get("files") or {}
    present = [n for n in names if (run_dir / n).is_file()]
    found = file_hashes(run_dir, [n for n in present if n in recorded])
    changed = [n for n in found if found[n] != recorded[n]]
    unrecorded = [n for n in present if n not in recorded]
    if changed or unrecorded:
        wrong = [f"{n} (recorded {recorded[n][:12]}, now {found[n][:12]})" for n in changed]
        wrong += [f"{n} (not recorded)" for n in unrecorded]
        repair = (f"; `finbench score {run_dir}` writes scores and rows again"
                  if set(changed + unrecorded) & set(SCORED) else "")
        raise RunError(f"{run_dir}: {', '.join(wrong)}: not the file(s) the run recorded in "
                       f"{MANIFEST}. A run stopped before its end records its files when the "
                       "same `finbench run` command is given again; otherwise they were "
                       f"changed after the run wrote them (`finbench audit {run_dir}` names "
                       f"every difference){repair}")


def read_manifest(run_dir: Path) -> dict:
    """A run's manifest; a RunError naming the file when it is no JSON object of the run
    format (a store's manifest, say, in a folder given as a run)."""
    path = Path(run_dir) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise RunError(f"{path}: not valid JSON ({exc})") from None
    found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
    if found != RUN_FORMAT:
        raise RunError(f"{path}: not a run's manifest (format {found!r}, not {RUN_FORMAT!r}): "
                       "give a run directory, or another folder for a new run")
    return manifest


def load_run_config(run_dir: Path):
    """The config a run ran with, as its manifest records it (an instance of its track's
    config class)."""
    return validated(read_manifest(run_dir)["config"], name=str(Path(run_dir) / MANIFEST))


def file_hashes(run_dir: Path, names=None, known: dict[str, str] | None = None
                ) -> dict[str, str]:
    """SHA-256 of the run's recorded files (:data:`RECORDED` and every journal part) that
    exist, or of ``names``; hashed a few at a time (hashing releases the GIL). ``known``:
    hashes made earlier in this process of files not written since (:func:`settled_files`),
    taken as they are."""
    run_dir = Path(run_dir)
    if names is None:
        names = _hashed(run_dir)
    known = {n: known[n] for n in names if n in known} if known else {}
    todo = [n for n in names if n not in known]
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        made = dict(zip(todo, pool.map(lambda n: sha256_file(run_dir / n), todo), strict=True))
    return {n: known[n] if n in known else made[n] for n in names}


def settled_files(run_dir: Path) -> list[str]:
    """The recorded files of a run that no step after its forecast table writes (scoring's
    inputs and the journal), those that exist: their hashes can be made while it scores."""
    settled = (*INPUTS, "journal.jsonl")
    return [n for n in _hashed(Path(run_dir)) if n in settled or n.startswith(PARTS + "/")]


def _hashed(run_dir: Path) -> list[str]:
    """The run's files that its manifest records the hashes of: :data:`RECORDED` and every
    journal part, those that exist."""
    return [n for n in RECORDED if (run_dir / n).is_file()] + journal_parts(run_dir)


def journal_parts(run_dir: Path) -> list[str]:
    """The run's journal parts, as names within it, in order."""
    parts = Path(run_dir) / PARTS
    return [f"{PARTS}/{p.name}" for p in sorted(parts.glob("*.parquet"))] if parts.is_dir() \
        else []


def receipt(run_dir: str | Path) -> str:
    """The line a command that finishes a run prints (a run, a merge; the run's folder local
    or on object storage): its manifest's SHA-256, the anchor of every hash the audit checks."""
    import hashlib

    from finbench.core.location import read_file

    digest = hashlib.sha256(read_file(run_dir, MANIFEST)).hexdigest()
    return (f"receipt: {MANIFEST} sha256 {digest} (keep it: `finbench audit` checks every file "
            "against the hashes this manifest records)")


def record_files(run_dir: Path, manifest: dict, names=None,
                 known: dict[str, str] | None = None) -> None:
    """Record in ``manifest["files"]`` the content hashes of the run's files (all of them, or
    ``names``; ``known``: as :func:`file_hashes`) and write the manifest."""
    files = dict(manifest.get("files") or {})
    files.update(file_hashes(run_dir, names, known))
    manifest["files"] = dict(sorted(files.items()))
    write_json(Path(run_dir) / MANIFEST, manifest)


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


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
