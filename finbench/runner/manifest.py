"""What a run writes about itself: the manifest's first content, and the FinBench versions
that made it."""

from __future__ import annotations

import json
import sys

from finbench.core.version import code_version, versions
from finbench.runlog.rundir import RUN_FORMAT


def new_manifest(config, source: dict, data: dict, facts: dict,
                 started: str) -> dict:
    """The manifest as the label pass leaves it (docs/spec.md §9): versions, the config and
    its source, the data snapshot (``data``: the track's facts), the tasks' facts."""
    return {
        "format": RUN_FORMAT,
        "version": 1,
        **code_version(),
        **versions(),
        "python": sys.version.split()[0],
        **source,
        "config": json.loads(config.model_dump_json()),
        "data": data,
        "models": [json.loads(m.model_dump_json()) for m in config.models],
        "tasks": facts,
        "started_at": started,
    }


def shard_field(shard) -> list[str] | None:
    """A shard as the manifest records it: its first and last session, and the horizons of
    a live horizon's run (their names joined by commas)."""
    if shard is None:
        return None
    field = [str(shard[0]), str(shard[1])]
    if len(shard) > 2 and shard[2] is not None:
        field.append(",".join(shard[2]) if not isinstance(shard[2], str) else shard[2])
    return field


def describe_code(version: dict) -> str:
    """``FinBench 0.1.0 (git 0123456789ab)``: a :func:`code_version` as a run says it."""
    return (f"FinBench {version.get('package_version')} "
            f"(git {str(version.get('git_revision'))[:12]})")


def same_finbench(recorded: dict, ours: dict) -> bool:
    """Whether a FinBench as recorded (a manifest, an entry of its ``code_revisions``, a
    worker's :func:`code_version`) is ``ours`` (a :func:`code_version`): the same package
    version and git revision."""
    return all(recorded.get(k) == v for k, v in ours.items())


def code_revisions(manifest: dict) -> list[dict]:
    """The FinBench versions that made a run, first to last, each with when it took over: the
    manifest's ``code_revisions``, or (a run made before they were listed, or one whose
    manifest is new) its own version from its start."""
    return manifest.get("code_revisions") or [
        {"package_version": manifest.get("package_version"),
         "git_revision": manifest.get("git_revision"), "at": manifest.get("started_at")}]


def made_by(manifest: dict) -> str | None:
    """What a command re-deriving a run (the audit) says of the FinBench that made it, when
    that is not only the one running now: each of its :func:`code_revisions` in turn, and
    this one."""
    ours = code_version()
    made = code_revisions(manifest)
    if all(same_finbench(m, ours) for m in made):
        return None
    by = ", then ".join(f"{describe_code(m)} from {m.get('at')}" for m in made)
    return (f"made by {by}; derived again with this {describe_code(ours)}: rows another "
            "FinBench computes otherwise are named as violations")


