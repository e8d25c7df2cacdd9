"""A run's report (``tables/``, ``figures/``, ``report.html``) against its receipt
(``report.json``) and against the report drawn again from the run's files: an edit is found
whatever hash it was given. Tables are text and compared byte for byte; so are the page and
the figures when this FinBench and matplotlib drew the report (another matplotlib draws other
bytes: then the page is compared with its images taken out, and the figures are not)."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from finbench.core.errors import FinbenchError
from finbench.data.store import sha256_file
from finbench.reports.receipt import FORMAT, PAGE, REPORT, drawn_by, report_files
from finbench.runlog.rundir import MANIFEST

AGAIN = "give `finbench report` again to draw it from the run as it is"
COPIED = (".sqlite", ".sqlite-wal", ".sqlite-shm")  # files SQLite may write to when read
_IMAGE = re.compile(rb'src="data:image/png;base64,[A-Za-z0-9+/=]*"')


def report_problems(run_dir: Path) -> list[str]:
    """Every problem of the run's report, or none when it has no report."""
    run_dir = Path(run_dir)
    present = report_files(run_dir)
    if not (run_dir / REPORT).is_file():
        return ([f"{present[0]}: report files ({len(present)}) without their receipt {REPORT}: "
                 f"{AGAIN}"] if present else [])
    try:
        receipt = json.loads((run_dir / REPORT).read_text())
        files = dict(receipt["files"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        return [f"{REPORT}: cannot be read as a report's receipt ({exc}): {AGAIN}"]
    if receipt.get("format") != FORMAT:
        return [f"{REPORT}: not a report's receipt (format {receipt.get('format')!r})"]
    problems = _receipt_problems(run_dir, receipt, files, present)
    return problems + _drawn_again(run_dir, receipt)


def _receipt_problems(run_dir: Path, receipt: dict, files: dict, present: list[str]
                      ) -> list[str]:
    problems = []
    now = sha256_file(run_dir / MANIFEST)
    if receipt.get("manifest_sha256") != now:
        problems.append(f"{REPORT}: the report was made from another state of the run "
                        f"({MANIFEST} {str(receipt.get('manifest_sha256'))[:12]}, now "
                        f"{now[:12]}): {AGAIN}")
    problems += [f"{rel}: listed in {REPORT} but missing" for rel in files
                 if rel not in present]
    problems += [f"{rel}: a report file {REPORT} does not list" for rel in present
                 if rel not in files]
    problems += [f"{rel}: content differs from the hash {REPORT} recorded ({files[rel][:12]}, "
                 f"now {sha[:12]})" for rel in present if rel in files
                 and (sha := sha256_file(run_dir / rel)) != files[rel]]
    return problems


def _drawn_again(run_dir: Path, receipt: dict) -> list[str]:
    """The report drawn again in a scratch folder from the run's files, file by file against
    the run's own."""
    from finbench.reports.build import report  # (matplotlib: only where a report is)
    from finbench.reports.figures import FiguresFailed

    ours = drawn_by()
    same = all(receipt.get(k) == v for k, v in ours.items())
    with tempfile.TemporaryDirectory(prefix="finbench-audit-report-") as tmp:
        # the page's title names the run's folder as it was named when the report was drawn
        scratch = Path(tmp) / str(receipt.get("folder") or run_dir.name)
        _inputs(run_dir, scratch)
        try:
            report(scratch)
        except FiguresFailed:  # (the receipt lists what was drawn: compared below)
            pass
        except FinbenchError as exc:  # the run's own files, refused: named above too
            return [f"the report cannot be drawn again from the run ({exc})"]
        theirs = report_files(scratch)
        problems = [f"{rel}: the report drawn again has no such file ({_why(same, receipt)})"
                    for rel in report_files(run_dir) if rel not in theirs]
        problems += [f"{rel}: missing: the report drawn again has it" for rel in theirs
                     if not (run_dir / rel).is_file()]
        for rel in theirs:
            if not (run_dir / rel).is_file() or (rel.startswith("figures/") and not same):
                continue
            have, want = (run_dir / rel).read_bytes(), (scratch / rel).read_bytes()
            if rel == PAGE and not same:
                have, want = _IMAGE.sub(b'src=""', have), _IMAGE.sub(b'src=""', want)
            if have != want:
                problems.append(f"{rel}: not what the report draws from the run again "
                                f"({_why(same, receipt)})")
    return problems


def _why(same: bool, receipt: dict) -> str:
    if same:
        return "edited after it was drawn"
    return (f"drawn by FinBench {receipt.get('package_version')} (git "
            f"{str(receipt.get('git_revision'))[:12]}) and matplotlib "
            f"{receipt.get('matplotlib')}, drawn again by this one: {AGAIN}")


def _inputs(run_dir: Path, scratch: Path) -> None:
    """The run's files but its report, in ``scratch``: linked where the file system lets it
    (a report only reads them), copied where it does not, and SQLite's files copied (a
    reader may write to them)."""
    skip = {*report_files(run_dir), REPORT, ".finbench.lock"}
    for path in sorted(run_dir.rglob("*")):
        rel = path.relative_to(run_dir).as_posix()
        if not path.is_file() or rel in skip:
            continue
        target = scratch / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.name.endswith(COPIED):
            shutil.copy2(path, target)
            continue
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)
