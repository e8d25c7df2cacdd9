"""The toy track: its config, data reader, tasks, labels, reference, scores, summary, audit,
report and task view, over the shared framework (docs/architecture.md, "The track seam")."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import pandas as pd
from pydantic import Field

from finbench.core.config import DataConfig, ModelBase, StrictModel, resolve_paths
from finbench.core.errors import RunError
from finbench.core.outputs import write_atomic
from finbench.core.times import NO_TIME
from finbench.forecasters.answers import NOT_APPLICABLE
from finbench.forecasters.base import Forecaster, register
from finbench.reports.figures import FigureSet
from finbench.reports.writers import write_table
from finbench.runlog.rundir import read_manifest, record_files
from finbench.scoring import bootstrap, rules
from finbench.tracks.base import ContextBatch, Inputs, Track, TrackPlugin

SCORE_FILES = ("scores.parquet", "scores.csv")


class ToyModel(ModelBase):
    kind: Literal["toy_constant"]
    p: Annotated[float, Field(ge=0, le=1)]


class ToyConfig(StrictModel):
    version: Literal[1] = 1
    track: Literal["toy"]
    data: DataConfig
    models: list[ToyModel] = Field(default_factory=list)
    executor: None = Field(None, exclude=True)

    def resolved(self, base: Path) -> ToyConfig:
        return resolve_paths(self, base)


def coins(config: ToyConfig) -> tuple[pd.DataFrame, str]:
    """The coins file of the store folder, and its digest (the data snapshot)."""
    raw = (Path(config.data.store) / "coins.json").read_bytes()
    rows = json.loads(raw)
    return pd.DataFrame({"task_id": [r["id"] for r in rows],
                         "heads": np.array([r["heads"] for r in rows], np.int64)}), \
        hashlib.sha256(raw).hexdigest()


@register("toy_constant")
class ToyConstant(Forecaster):
    needs_context = False

    def _answer(self, inputs: Inputs):
        n = len(inputs.tasks)
        inputs.shared[("digests", self.name)] = [
            hashlib.sha256(f"{t}|{self.config.p!r}".encode()).hexdigest()
            for t in inputs.tasks["task_id"]]
        return pd.DataFrame({"p_up": np.full(n, self.config.p), "lower": np.full(n, np.nan),
                             "upper": np.full(n, np.nan),
                             "interval_note": [NOT_APPLICABLE] * n}), {}

    def _receipts(self, inputs: Inputs):
        return np.full(len(inputs.tasks), NO_TIME, np.int64), inputs.shared.pop(
            ("digests", self.name))


class ToyTrack(Track):
    name = "toy"
    baseline_kinds = ("toy_constant",)

    def __init__(self, config: ToyConfig) -> None:
        self.config = config
        self.frame, self.sha = coins(config)
        self.tasks = self.frame[["task_id"]]

    @property
    def snapshot_sha256(self) -> str:
        return self.sha

    def data_facts(self) -> dict:
        return {"store": str(self.config.data.store), "snapshot_sha256": self.sha,
                "synthetic": True, "description": "toy coins"}

    @property
    def prompt(self):
        return None

    def label(self, *, contexts: bool, echo=None) -> pd.DataFrame:
        return self.frame.rename(columns={"heads": "y"}).assign(status="ok")

    def warnings(self, labels: pd.DataFrame) -> list[str]:
        return []

    def summary(self, labels: pd.DataFrame) -> dict:
        return {"tasks": len(labels), "excluded": {}, "labels": {"ok": len(labels)}}

    def plain_inputs(self, rows: np.ndarray) -> Inputs:
        return Inputs(tasks=self.tasks.iloc[rows].reset_index(drop=True))

    def context_batches(self, wanted: np.ndarray):
        rows = np.flatnonzero(wanted)
        yield ContextBatch(rows, lambda at: self.plain_inputs(rows[at]))

    def release(self) -> None:
        return


def score_table(run_dir: Path, config: ToyConfig) -> pd.DataFrame:
    """Each model's Brier score and its bootstrap interval (every coin its own cluster)."""
    labels = pd.read_parquet(run_dir / "labels.parquet")
    forecasts = pd.read_parquet(run_dir / "forecasts.parquet")
    out = []
    for m in config.models:
        mine = forecasts[forecasts["model"] == m.name].merge(labels, on="task_id")
        loss = rules.brier_loss(mine["y"], mine["p_up"])
        ci = bootstrap.mean_ci(loss, mine["task_id"].to_numpy(), replicates=200, seed=1)
        out.append({"model": m.name, "n": ci.n, "brier": ci.estimate, "brier_lo": ci.lower,
                    "brier_hi": ci.upper})
    return pd.DataFrame(out)


class ToyPlugin(TrackPlugin):
    name = "toy"
    description = "will a coin of the toy file land heads"
    config_class = ToyConfig
    read_columns = {"labels.parquet": {"task_id": "text", "y": "number"}}
    score_files = SCORE_FILES

    def open(self, config: ToyConfig) -> ToyTrack:
        return ToyTrack(config)

    def score(self, run_dir: Path, config: ToyConfig, *, skipped: dict, inputs=None):
        table = score_table(run_dir, config)
        write_atomic(run_dir / "scores.parquet", lambda p: table.to_parquet(p, index=False))
        write_atomic(run_dir / "scores.csv", lambda p: Path(p).write_text(
            table.to_csv(index=False, float_format="%.12g")))
        record_files(run_dir, read_manifest(run_dir), list(SCORE_FILES))
        return table

    def summary(self, run_dir: Path) -> list[str]:
        table = pd.read_parquet(Path(run_dir) / "scores.parquet")
        return ["\n".join(f"{r.model}: Brier {r.brier:.4f} (n={r.n})"
                          for r in table.itertuples())]

    def audit(self, run_dir: Path, manifest: dict, config: ToyConfig, echo) -> list[str]:
        problems = []
        frame, sha = coins(config)
        if sha != manifest["data"]["snapshot_sha256"]:
            problems.append("coins.json: not the run's snapshot")
        labels = pd.read_parquet(run_dir / "labels.parquet")
        if labels["y"].tolist() != frame["heads"].tolist():
            problems.append("labels.parquet: differs from the coins derived again")
        if not score_table(run_dir, config).equals(pd.read_parquet(run_dir / "scores.parquet")):
            problems.append("scores.parquet: differs from the scores computed again")
        return problems

    def report(self, run_dir: Path):
        table = pd.read_parquet(run_dir / "scores.parquet")
        paths = write_table(table, run_dir / "tables", "toy_scores", "Brier by model.")
        return paths, FigureSet(run_dir / "figures")

    def show(self, run_dir: Path, task_id: str, model: str | None) -> dict:
        rows = pd.read_parquet(run_dir / "forecasts.parquet")
        rows = rows[rows["task_id"] == task_id]
        if rows.empty:
            raise RunError(f"{run_dir}: no task {task_id!r}")
        return {"task": {"task_id": task_id},
                "models": [{"model": r.model, "p_up": r.p_up} for r in rows.itertuples()]}


PLUGIN = ToyPlugin()
