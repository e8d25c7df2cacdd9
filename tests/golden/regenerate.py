"""Regenerate the golden pilot tables: runs configs/pilot.toml on the bundled synthetic sample
(language models skipped: their key variables are removed) and copies the report tables here.

Run: .venv/bin/python tests/golden/regenerate.py
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

GOLDEN = Path(__file__).resolve().parent / "pilot"
TABLES = ("scores_by_horizon", "scores_aggregate", "paired_brier", "calibration",
          "decision_kelly")
KEY_VARIABLES = ("OPENAI_API_KEY", "FINBENCH_OPEN_API_KEY", "DEEPSEEK_API_KEY",
                 "FINBENCH_OPEN_BASE_URL")


def pilot_report(out: Path) -> Path:
    """Run the pilot into ``out`` and write its report; returns the tables folder."""
    from finbench.reports.build import report
    from finbench.runner import run

    for name in KEY_VARIABLES:
        os.environ.pop(name, None)
    run(ROOT / "configs" / "pilot.toml", out, echo=lambda *_: None)
    report(out)
    return out / "tables"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tables = pilot_report(Path(tmp) / "pilot")
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for name in TABLES:
            for ext in ("md", "tex"):
                shutil.copy(tables / f"{name}.{ext}", GOLDEN / f"{name}.{ext}")
    print(f"wrote {len(TABLES) * 2} golden files to {GOLDEN}")


if __name__ == "__main__":
    main()
