"""Shards: one config split by date range into independent runs, merged into one run directory.

Each shard is a normal run over a sub-range of sessions (``finbench run CONFIG --shard
START:END``). Baselines read their history from the store, not from other shards, so a shard's
forecasts equal the unsharded run's. ``merge_shards`` checks that the shards come from the same
config file and data snapshot and do not overlap, puts tasks, labels and forecasts in the
unsharded order, and re-scores: the scores are byte-identical to the unsharded run's. The
forecast table is the shards' row groups copied byte for byte, a model at a time (only their
task ids decoded, to check the order), so memory holds no shard's forecasts.
"""

from __future__ import annotations

import json
import shutil
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from finbench.core.errors import RunError
from finbench.core.lookup import positions
from finbench.core.outputs import write_atomic, write_json
from finbench.core.version import code_version
from finbench.runlog.forecast_table import join_tables, ordered_table, write_forecasts
from finbench.runlog.journal import JOURNAL, PARTS
from finbench.runlog.rows import FORECAST_SCHEMA
from finbench.runlog.rundir import (
    INPUTS,
    MANIFEST,
    MIN_K,
    PROBES,
    SLICES,
    check_recorded,
    finished_run,
    journal_parts,
    now,
    read_manifest,
    record_files,
)
from finbench.runlog.runlock import RunLock
from finbench.runlog.stances import STANCES_FILE
from finbench.runlog.tool_calls import write_tool_calls
from finbench.runlog.transcripts import Transcripts
from finbench.runner.manifest import describe_code, same_finbench
from finbench.runner.scores import rescore
from finbench.tracks.configs import validated


def task_order(tasks: pd.DataFrame, config) -> pd.DataFrame:
    """Tasks in the order an unsharded run lists them: session, horizon, ticker (as configured)."""
    def rank(column: str, names: list[str]) -> np.ndarray:  # unknown names last
        at = positions(tasks[column], names)
        return np.where(at < 0, len(names), at)

    keyed = tasks.assign(_h=rank("horizon", list(config.tasks.horizons)),
                         _t=rank("ticker", list(config.tasks.tickers)))
    keyed = keyed.sort_values(["session", "_h", "_t"], kind="stable")
    return keyed.drop(columns=["_h", "_t"]).reset_index(drop=True)


def _join_forecasts(dirs: list[Path], path: Path, task_ids, models: list[str]) -> bool:
    """Write the merged forecast table by copying each model's row groups of each shard, the
    shards in the order of their first session (:func:`join_tables`): what shards of one
    config write lines up so (each shard's table holds a model's rows in its task order, and
    shards are disjoint date ranges). True when it did; False (and no file) when some rows
    are out of that order, to be ordered in memory."""
    firsts = [pq.read_table(d / "tasks.parquet", columns=["session"]).column("session")
              for d in dirs]
    starts = [pc.min(s).as_py() or "" for s in firsts]
    ordered = [d for _, d in sorted(zip(starts, dirs, strict=True), key=lambda x: x[0])]
    return join_tables(path, [d / "forecasts.parquet" for d in ordered], task_ids, models)


def merge_shards(shard_dirs: list[str | Path], out: str | Path, *,
                 merged_from: list[str] | None = None) -> Path:
    """Merge finished shard runs into ``out`` and score it (``merged_from``: how the manifest
    names the shards, when they were copied from elsewhere; default their folders)."""
    dirs = [Path(d) for d in shard_dirs]
    if not dirs:
        raise RunError("merge: give at least one shard directory")
    manifests = []
    for d in dirs:
        # what it reads or copies: a changed file is never carried into the merged run
        check_recorded(finished_run(d), [*INPUTS, JOURNAL, *journal_parts(d)])
        manifests.append(read_manifest(d))
    first = manifests[0]
    same_code(dirs, manifests)
    for d, m in zip(dirs[1:], manifests[1:], strict=True):
        for key, what in (("config_sha256", "config file"),):
            if m.get(key) != first.get(key):
                raise RunError(f"{d}: comes from a different {what} than {dirs[0]}")
        if m["data"]["snapshot_sha256"] != first["data"]["snapshot_sha256"]:
            raise RunError(f"{d}: saw data snapshot {m['data']['snapshot_sha256'][:12]}, "
                           f"not {first['data']['snapshot_sha256'][:12]} like {dirs[0]}")
        if m.get("skipped_models") != first.get("skipped_models"):
            raise RunError(f"{d}: skipped other models than {dirs[0]} "
                           f"({m.get('skipped_models')} vs {first.get('skipped_models')})")
    tasks = pd.concat([pd.read_parquet(d / "tasks.parquet") for d in dirs], ignore_index=True)
    dupes = tasks["task_id"][tasks["task_id"].duplicated()]
    if len(dupes):
        raise RunError(f"merge: shards overlap, e.g. task {dupes.iloc[0]} is in two of them")
    config = validated(first["config"])
    spec = config.tasks.model_copy(update={
        "start": min(validated(m["config"]).tasks.start for m in manifests),
        "end": max(validated(m["config"]).tasks.end for m in manifests)})
    config = config.model_copy(update={"tasks": spec})
    tasks = task_order(tasks, config)
    labels = pd.concat([pd.read_parquet(d / "labels.parquet") for d in dirs], ignore_index=True)
    labels = labels.set_index("task_id").loc[tasks["task_id"]].reset_index()
    out = Path(out)
    outside_shards(out, dirs)
    with RunLock(out, command="finbench merge"):
        check_target(out, first, tasks["task_id"])
        _write_merged(dirs, manifests, config, tasks, labels, out,
                      merged_from or [str(d) for d in dirs])
    return out


def same_code(dirs: list[Path], manifests: list[dict]) -> None:
    """A RunError unless every shard was made by the FinBench merging it (version and git
    revision, :func:`~finbench.runner.manifest.code_version`): the merge scores the shards'
    rows and its manifest names one FinBench for the whole run."""
    ours = code_version()
    for d, m in zip(dirs, manifests, strict=True):
        if not same_finbench(m, ours):
            raise RunError(f"{d}: made by {describe_code(m)}, but this merge is "
                           f"{describe_code(ours)}: a run's shards and its merge come from one "
                           "FinBench; run the shard again with this one, or merge with the "
                           "shard's")


def outside_shards(out: Path, dirs: list[Path]) -> None:
    """A RunError if ``out`` is a shard or lies inside one (the merge would write over that
    shard's files); shards inside ``out`` are fine (the Dask executor keeps them there)."""
    target = out.resolve()
    for d in dirs:
        if target.is_relative_to(d.resolve()):
            raise RunError(f"merge: --out {out} is the shard {d} or lies inside it; the merged "
                           "run goes into a folder of its own")


def check_target(out: Path, first: dict, task_ids: pd.Series) -> None:
    """A RunError unless a run ``out`` holds already is of the same config, data snapshot
    and tasks as the merge (a merge given again, or a run resumed under the Dask executor),
    so nothing of another run is left beside the merged one."""
    if not (out / MANIFEST).is_file():
        return
    held = read_manifest(out)
    if held.get("config_sha256") != first.get("config_sha256"):
        raise RunError(f"merge: {out} holds a run of another config "
                       f"({str(held.get('config_sha256'))[:12]}, the shards' is "
                       f"{first['config_sha256'][:12]}): use another --out")
    seen = held.get("data", {}).get("snapshot_sha256")
    if seen != first["data"]["snapshot_sha256"]:
        raise RunError(f"merge: {out} holds a run that saw data snapshot {str(seen)[:12]}, "
                       f"not the shards' {first['data']['snapshot_sha256'][:12]}: use another "
                       "--out")
    if (out / "tasks.parquet").is_file():
        held_ids = pd.read_parquet(out / "tasks.parquet", columns=["task_id"])["task_id"]
        if set(held_ids) != set(task_ids):
            raise RunError(f"merge: {out} holds a run of other tasks ({len(held_ids)}, the "
                           f"shards hold {len(task_ids)}): use another --out")


def _merge_calls(dirs: list[Path], out: Path) -> None:
    """The shards' LLM transcripts into one (read back and stored again: each shard compressed
    its own with its own dictionary) and their stance judgements into one log."""
    merged = Transcripts(out)
    try:
        for d in dirs:
            shard = Transcripts(d)
            try:
                for entries in shard.each():
                    merged.put([e for e in entries if "unreadable" not in e])
            finally:
                shard.close()
    finally:
        merged.close()
    if any((d / STANCES_FILE).is_file() for d in dirs):
        with open(out / STANCES_FILE, "wb") as fh:
            for d in dirs:
                if (d / STANCES_FILE).is_file():
                    with open(d / STANCES_FILE, "rb") as part:
                        shutil.copyfileobj(part, fh)


def _merge_slices(dirs: list[Path], config, tasks: pd.DataFrame, out: Path) -> None:
    """The shards' declared slices into one ``slices.parquet``: each slice in the config's
    order, its tasks in the run's (each task's value is its own and the store's, whichever
    shard found it)."""
    parts = [pq.read_table(d / SLICES) for d in dirs if (d / SLICES).is_file()]
    if not parts:
        return
    table = pa.concat_tables(parts)
    order = {name: i for i, name in enumerate(s.name for s in config.slices)}
    slice_rank = np.array([order[x] for x in table.column("slice").to_pylist()], np.int64)
    task_rank = positions(table.column("task_id"), tasks["task_id"])
    table = table.take(np.lexsort((task_rank, slice_rank)))
    write_atomic(out / SLICES, partial(pq.write_table, table.replace_schema_metadata(None)))


def _merge_probes(dirs: list[Path], config, ids, out: Path) -> None:
    """The shards' recall probes (``probes.parquet``, a forecast table) and Min-K% scores
    (``min_k.parquet``) into the run's, ordered as a single process orders them: models in
    the config's order, each model's tasks in the run's."""
    names = [m.name for m in config.models]
    probes = [pq.read_table(d / PROBES, schema=FORECAST_SCHEMA) for d in dirs
              if (d / PROBES).is_file()]
    if probes:
        table = pa.concat_tables(probes)
        present = [n for n in names if n in set(table.column("model").to_pylist())]
        write_forecasts(out / PROBES, [ordered_table(table, ids, present)])
    scores = [pq.read_table(d / MIN_K) for d in dirs if (d / MIN_K).is_file()]
    if scores:
        table = pa.concat_tables(scores)
        model_rank = positions(table.column("model"), pd.Series(names, dtype=object))
        task_rank = positions(table.column("task_id"), pd.Series(ids, dtype=object))
        table = table.take(np.lexsort((task_rank, model_rank)))
        write_atomic(out / MIN_K, partial(pq.write_table, table.replace_schema_metadata(None)))


def _write_merged(dirs: list[Path], manifests: list[dict], config,
                  tasks: pd.DataFrame, labels: pd.DataFrame, out: Path,
                  merged_from: list[str]) -> None:
    """Write the merged run into ``out`` (locked by the caller) and score it."""
    first = manifests[0]
    names = [m.name for m in config.models if m.name not in first.get("skipped_models", {})]
    write_atomic(out / "tasks.parquet", partial(tasks.to_parquet, index=False))
    write_atomic(out / "labels.parquet", partial(labels.to_parquet, index=False))
    _merge_slices(dirs, config, tasks, out)
    ids = tasks["task_id"].to_numpy(object)
    _merge_probes(dirs, config, ids, out)
    if not _join_forecasts(dirs, out / "forecasts.parquet", ids, names):
        forecasts = pa.concat_tables([pq.read_table(d / "forecasts.parquet",
                                                    schema=FORECAST_SCHEMA) for d in dirs])
        write_forecasts(out / "forecasts.parquet", [ordered_table(forecasts, ids, names)])
    with open(out / JOURNAL, "wb") as fh:
        for d in dirs:
            if (d / JOURNAL).is_file():
                with open(d / JOURNAL, "rb") as part:
                    shutil.copyfileobj(part, fh)
    (out / PARTS).mkdir(exist_ok=True)
    for stale in (out / PARTS).glob("*.parquet"):  # of a run held before: the merge is whole
        stale.unlink()
    number = 0
    for d in dirs:
        for part in sorted((d / PARTS).glob("*.parquet")) if (d / PARTS).is_dir() else []:
            shutil.copy(part, out / PARTS / f"{number:06d}.parquet")
            number += 1
    _merge_calls(dirs, out)
    agents = [m.name for m in config.models if getattr(m, "tools", None) and m.name in names]
    if agents:  # the receipts of the merged rows' tool calls
        write_tool_calls(out, agents)
    summary = dict(first["tasks"])
    summary["tasks"] = len(tasks)
    for key in ("excluded", "excluded_sessions", "labels"):
        merged: dict[str, int] = {}
        for m in manifests:
            for k, v in (m["tasks"].get(key) or {}).items():
                merged[k] = merged.get(k, 0) + v
        summary[key] = merged
    manifest = {**first, "config": json.loads(config.model_dump_json()), "tasks": summary,
                "shard": None, "merged_from": merged_from, "finished_at": now(),
                "files": {}}
    write_json(out / MANIFEST, manifest)
    rescore(out)
    record_files(out, read_manifest(out))
