"""FinBench: does a forecaster state honest uncertainty about intraday stock moves?

The public API is what ``__all__`` lists; every other module is internal and may change
between versions (docs/architecture.md). A typical session (run from the repository's top
folder; the pilot's language models are skipped without their keys):

>>> import finbench, tempfile
>>> run_dir = finbench.run("configs/pilot.toml", tempfile.mkdtemp() + "/pilot",
...                        echo=lambda *_: None)
>>> scores = finbench.score_run(run_dir)      # the scores table (a pandas frame)
>>> finbench.audit_run(run_dir)                # every number re-derived from the store
[]
>>> tables, figures = finbench.report(run_dir)
>>> len(figures) > 0
True

Names are imported on first use, so ``import finbench`` stays fast.
"""

from importlib import import_module

from finbench.core.errors import (
    ConfigError,
    DataError,
    FinbenchError,
    LookaheadError,
    ModelStopped,
    RunError,
    StoreError,
)
from finbench.core.version import __version__

_LAZY = {
    "load_config": "finbench.tracks.configs",
    "RunConfig": "finbench.tracks.intraday.config",
    "get_track": "finbench.tracks",
    "list_tracks": "finbench.tracks",
    "Store": "finbench.data.store",
    "ingest_bars": "finbench.data.ingest",
    "ingest_headlines": "finbench.data.ingest",
    "write_sample": "finbench.data.synth",
    "run": "finbench.runner",
    "merge_shards": "finbench.shards",
    "score_run": "finbench.runner.scores",
    "audit_run": "finbench.audit",
    "report": "finbench.reports.build",
    "paper": "finbench.reports.build",
}

__all__ = [
    "ConfigError", "DataError", "FinbenchError", "LookaheadError", "ModelStopped", "RunConfig",
    "RunError", "Store", "StoreError", "__version__", "audit_run", "get_track", "ingest_bars",
    "ingest_headlines", "list_tracks", "load_config", "merge_shards", "paper", "report", "run",
    "score_run",
    "write_sample",
]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'finbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
