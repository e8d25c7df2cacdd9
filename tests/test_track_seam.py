"""The track seam is real: the runner's forecast pass drives any :class:`Track`, here a toy
track that knows nothing of bars, and journals one validated, receipted row per task."""

import hashlib

import numpy as np
import pandas as pd

from finbench.core.config import ScriptedModel
from finbench.forecasters.base import build_forecaster
from finbench.runlog.journal import Journal
from finbench.runner.forecasting import forecast_pass
from finbench.tracks import open_track
from finbench.tracks.base import ContextBatch, Inputs, Track
from tests.helpers import aapl_config

SEEN = pd.Timestamp("2025-01-15 14:00", tz="UTC")


class ToyContexts:
    """Contexts of the toy track: each task read one fact, available at SEEN."""

    def __init__(self, ids) -> None:
        self.ids = list(ids)

    @property
    def max_input_time(self) -> pd.Series:
        return pd.Series([SEEN] * len(self.ids)).astype("datetime64[ns, UTC]")

    def digests(self) -> list[str]:
        return [hashlib.sha256(i.encode()).hexdigest() for i in self.ids]


class ToyTrack(Track):
    """Will it rain? Two batches of tasks; no history, no bars."""

    name = "toy"
    baseline_kinds = ()

    def __init__(self, n: int) -> None:
        self.tasks = pd.DataFrame({"task_id": [f"CITY{i}|2025-01-15|NOON" for i in range(n)]})
        self.released = False

    snapshot_sha256 = "0" * 64

    def data_facts(self) -> dict:
        return {"store": "toy", "snapshot_sha256": self.snapshot_sha256, "synthetic": True}

    prompt = None

    def label(self, *, contexts: bool, echo=None) -> pd.DataFrame:
        return self.tasks.assign(y=np.arange(len(self.tasks)) % 2, status="ok")

    def warnings(self, labels):
        return []

    def summary(self, labels):
        return {"tasks": len(self.tasks)}

    def plain_inputs(self, rows):
        raise AssertionError("no forecaster of this test reads history alone")

    def context_batches(self, wanted):
        rows = np.flatnonzero(wanted)
        for where in np.array_split(rows, 2):
            tasks = self.tasks.iloc[where].reset_index(drop=True)

            def inputs(at, tasks=tasks):
                chosen = tasks.iloc[at].reset_index(drop=True)
                return Inputs(tasks=chosen, contexts=ToyContexts(chosen["task_id"]))

            yield ContextBatch(where, inputs)

    def release(self) -> None:
        self.released = True


def test_the_forecast_pass_drives_a_track_it_was_not_written_for(tmp_path):
    track = ToyTrack(7)
    scripted = build_forecaster(ScriptedModel(name="s", kind="scripted",
                                              answers=['{"p_up": 0.7, "lower": -1, "upper": 1}',
                                                       "not json"]))
    todo = {"s": np.ones(7, bool)}
    todo["s"][3] = False  # answered by an earlier run: not asked again
    journal = Journal(tmp_path)
    forecast_pass(track, [scripted], todo, {}, journal, lambda *_: None, dry_run=False,
                  batch=False, stopped={})
    journal.flush()
    rows = journal.frame().sort_values("task_id").reset_index(drop=True)
    want = [t for i, t in enumerate(track.tasks["task_id"]) if i != 3]
    assert rows["task_id"].tolist() == want
    assert (rows["max_input_time"] == SEEN).all()
    assert rows["input_sha256"].tolist() == [hashlib.sha256(t.encode()).hexdigest()
                                             for t in want]
    valid = rows["raw"] != "not json"
    assert rows.loc[valid, "p_up"].eq(0.7).all() and not rows.loc[~valid, "valid"].any()


def test_a_config_opens_the_intraday_track(sample_store, tmp_path):
    from finbench.tracks.configs import load_config

    cfg = aapl_config(tmp_path / "c.toml", sample_store,
                      '[[models]]\nname = "coin"\nkind = "coin"\n')
    track = open_track(load_config(cfg))
    assert track.name == "intraday" and len(track.tasks) == 3
    labels = track.label(contexts=False)
    assert labels["task_id"].tolist() == track.tasks["task_id"].tolist()
    batch = track.plain_inputs(np.arange(len(track.tasks)))
    assert batch.tasks["task_id"].tolist() == track.tasks["task_id"].tolist()
    assert batch.known is not None  # the label history, built once by the label pass
    track.release()
