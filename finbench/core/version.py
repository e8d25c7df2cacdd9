"""The package version, stamped on every run, and which FinBench this process runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

__version__ = "0.1.0"


def code_version() -> dict[str, str | None]:
    """Which FinBench this process runs: its package version and git revision (None outside
    a git checkout), as a run's manifest records them."""
    return {"package_version": __version__, "git_revision": _git_revision()}


def _git_revision() -> str | None:
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parent, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() or None
