"""What every track shares with the forecasters: :class:`Inputs`, what a batch of tasks gives
a forecaster. A track (``finbench.tracks.intraday``) builds them; forecasters read them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass
class Inputs:
    """What a batch of tasks gives a forecaster: tasks, their gated contexts (None for
    forecasters that need none), and the label history known to baselines (``history`` rows
    carry ``label_known_at``; ``history_rows``: where each task lies in it, if the caller
    knows). ``shared`` holds what forecasters given the same inputs compute
    once (the baselines' receipts)."""

    tasks: pd.DataFrame
    contexts: object = None  # finbench.tracks.intraday.gate.ContextIndex
    history: pd.DataFrame | None = None
    bars: object = None  # finbench.data.bars.BarArrays
    shared: dict = field(default_factory=dict)
    history_rows: np.ndarray | None = None  # row of ``history`` holding each task, when known
    sessions: np.ndarray | None = None  # the exchange's sessions over ``history`` (days since
    # 1970, sorted): baselines count the sessions their windows skip
    known: object = None  # the label history indexed for lookups (a track's History), built
    # once per run; None: forecasters index ``history`` themselves
    prompt: object = None  # finbench.tracks.intraday.prompt.PromptSettings of the run (LLMs)
