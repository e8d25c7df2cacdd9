"""The package version, stamped on every run, and which FinBench this process runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

__version__ = "0.1.0"
# What a run's numbers depend on beyond its inputs, each recorded in every manifest: the
# engine (any change that alters a number a run computes, in any table, bumps it) and the
# scoring rules (a change to a rule's definition, docs/spec.md §8, bumps both). The CHANGELOG
# says, for each bump, which numbers change and by how much; `finbench score` prints the
# digest of a run's score tables (finbench.runner.scores.score_digest) so that a rescoring
# can be checked against a published one.
ENGINE_VERSION = 3  # 3: what each forecast cost in rows.* and rows3.* (no number changes)
# 2: one percentile rule (numpy's linear) and NaN for undefined, both tracks
SCORING_RULES_VERSION = 2  # 2: the event track's rules are the shared ones (scoring.rules)


def versions() -> dict[str, int]:
    """The engine and scoring-rules versions, as a manifest records them."""
    return {"engine_version": ENGINE_VERSION, "scoring_rules_version": SCORING_RULES_VERSION}


def describe_version() -> str:
    """``finbench 0.1.0 (engine 3, scoring rules 2)``: what ``finbench --version`` prints."""
    return (f"finbench {__version__} (engine {ENGINE_VERSION}, scoring rules "
            f"{SCORING_RULES_VERSION})")


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
