"""A run's files against what its manifest recorded when they were written: the content hash
of every file, and the config against its file's hash and text; and a run's tables against
the columns the audit reads from them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from finbench.core.config import trial_config
from finbench.core.errors import ConfigError
from finbench.core.times import to_ns
from finbench.runlog.rows import FORECAST_SCHEMA
from finbench.runlog.rundir import MANIFEST, file_hashes, journal_parts
from finbench.tracks.configs import parse_config, shard_config

_KINDS = {  # of a column, by its Arrow type
    "text": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t) or (
        pa.types.is_dictionary(t) and pa.types.is_string(t.value_type)),
    "number": lambda t: pa.types.is_floating(t) or pa.types.is_integer(t),
    "time": pa.types.is_timestamp,
    "true or false": pa.types.is_boolean,
}
def hash_problems(run_dir: Path, manifest: dict) -> list[str]:
    """Each file the manifest records, hashed again; files missing, changed, or not recorded
    (a journal part added)."""
    recorded = manifest.get("files")
    if not recorded:
        return [f"{MANIFEST}: records no file hashes (a run made before they were recorded, "
                "or the record was removed): its files cannot be checked; run it again"]
    run_dir = Path(run_dir)
    present = [name for name in recorded if (run_dir / name).is_file()]
    found = file_hashes(run_dir, present)
    problems = [f"{name}: recorded in {MANIFEST} but missing" for name in recorded
                if name not in found]
    problems += [f"{name}: content differs from the hash {MANIFEST} recorded when it was "
                 f"written ({recorded[name][:12]}, now {sha[:12]})"
                 for name, sha in found.items() if sha != recorded[name]]
    problems += [f"{name}: a journal part {MANIFEST} does not record"
                 for name in journal_parts(run_dir)
                 if name not in recorded]
    if (run_dir / "journal.jsonl").is_file() and "journal.jsonl" not in recorded:
        problems.append(f"journal.jsonl: not recorded in {MANIFEST}")
    return problems


def config_problems(manifest: dict) -> list[str]:
    """The config the run records against its source: its text must hash to
    ``config_sha256`` and, parsed (and restricted to the shard, for a shard), give the
    manifest's config, key by key."""
    text = manifest.get("config_toml")
    if text is None:
        return [f"{MANIFEST}: holds no config text, so its config cannot be checked against "
                "its hash (a run made before the text was kept); run it again"]
    problems = []
    sha = hashlib.sha256(text.encode()).hexdigest()
    if sha != manifest.get("config_sha256"):
        problems.append(f"{MANIFEST}: config_sha256 {str(manifest.get('config_sha256'))[:12]} "
                        f"is not the hash of its config text ({sha[:12]})")
    try:
        config = parse_config(text, Path(manifest.get("config_dir", ".")), name=MANIFEST)
    except ConfigError as exc:
        return [*problems, f"{MANIFEST}: its config text does not load: {exc}"]
    if manifest.get("shard"):
        config = shard_config(config, *manifest["shard"])
    if manifest.get("trial"):  # --models: the config's models named there alone
        try:
            config = trial_config(config, manifest["trial"].get("models"))
        except ConfigError as exc:
            return [*problems, f"{MANIFEST}: its trial is no trial of its config: {exc}"]
    want = json.loads(config.model_dump_json())
    have = manifest.get("config", {})
    try:  # keys a later FinBench added are read with their defaults, as the run is read
        have = json.loads(type(config).model_validate(have).model_dump_json())
    except ValueError:  # (not a valid config: named below, compared as it is)
        pass
    if manifest.get("merged_from"):  # a merged run spans its shards' dates
        want["tasks"]["start"], want["tasks"]["end"] = (have.get("tasks", {}).get("start"),
                                                        have.get("tasks", {}).get("end"))
    for key, theirs, ours in _differences(have, want):
        problems.append(f"{MANIFEST}: config {key} is {theirs!r}, but its config text gives "
                        f"{ours!r}")
    try:
        type(config).model_validate(have)  # the track's config class
    except ValueError as exc:
        problems.append(f"{MANIFEST}: its config is not a valid config ({exc})")
    return problems


def _differences(a, b, key: str = ""):
    """(dotted key, a's value, b's value) wherever two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            yield from _differences(a.get(k), b.get(k), f"{key}.{k}" if key else k)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _differences(x, y, f"{key}[{i}]")
    elif a != b:
        yield key, a, b


def table_problems(run_dir: Path, read_columns: dict[str, dict[str, str]]) -> list[str]:
    """A run's tables against the columns the audit reads (``read_columns``: its track's
    :attr:`~finbench.tracks.base.TrackPlugin.read_columns`, each there, of its kind), and
    ``forecasts.parquet``'s columns against the kinds of the types FinBench writes (the
    audit reads a table rewritten by pandas, with ``large_string`` for ``string``, as its
    own). A column of nulls alone has no type and passes (an empty retrieval table written
    by pandas). Any problem here stops the audit's re-derivations, which read them."""
    problems = []
    for name, columns in read_columns.items():
        if not (Path(run_dir) / name).is_file():
            problems.append(f"{name}: missing")
            continue
        schema = pq.read_schema(Path(run_dir) / name)
        for column, kind in columns.items():
            if column not in schema.names:
                problems.append(f"{name}: has no column {column}")
            elif not _of_kind(t := schema.field(column).type, kind):
                problems.append(f"{name}: column {column} is {t}, not {kind}")
    schema = pq.read_schema(Path(run_dir) / "forecasts.parquet")
    for field in FORECAST_SCHEMA:
        kind = next(k for k, is_kind in _KINDS.items() if is_kind(field.type))
        if field.name in schema.names and not _of_kind(t := schema.field(field.name).type, kind):
            problems.append(f"forecasts.parquet: column {field.name} is {t}, not {kind}")
    return problems


def _of_kind(arrow_type: pa.DataType, kind: str) -> bool:
    """Whether a column of ``arrow_type`` holds values of ``kind``; a column of nulls alone
    (no type) does."""
    return pa.types.is_null(arrow_type) or _KINDS[kind](arrow_type)


def task_problems(stored: pd.DataFrame, planned: pd.DataFrame, *, shown: int = 20) -> list[str]:
    """Every field of every task as stored against the task the config gives (the same ids in
    the same order already checked): times compared as instants, the rest as values."""
    problems = [f"tasks.parquet: has no column {c}" for c in planned.columns
                if c not in stored.columns]
    problems += [f"tasks.parquet: has a column {c} no task of the config has"
                 for c in stored.columns if c not in planned.columns]
    for col in [c for c in planned.columns if c in stored.columns and c != "task_id"]:
        a, b = stored[col], planned[col]
        if isinstance(b.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(b.dtype):
            try:
                same = to_ns(a) == to_ns(b)
            except (TypeError, ValueError):
                same = np.zeros(len(a), bool)
        else:
            u, v = a.astype(object).to_numpy(), b.astype(object).to_numpy()
            same = np.asarray(u == v, bool) | (pd.isna(u) & pd.isna(v))
        bad = np.flatnonzero(~same)
        problems += [f"tasks.parquet task {planned['task_id'].iat[i]}: {col} is {a.iat[i]!r}, "
                     f"but the config gives {b.iat[i]!r}" for i in bad[:shown]]
        if len(bad) > shown:
            problems.append(f"... and {len(bad) - shown} more tasks of tasks.parquet differ in "
                            f"{col}")
    return problems
