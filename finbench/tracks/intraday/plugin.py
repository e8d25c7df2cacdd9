"""The intraday track's plugin (:class:`~finbench.tracks.base.TrackPlugin`): what the shared
commands ask of it, each answered by the module that holds it."""

from __future__ import annotations

from pathlib import Path

from finbench.tracks.base import TrackPlugin
from finbench.tracks.intraday import baselines  # noqa: F401 - registers its forecaster kinds
from finbench.tracks.intraday import scores as scoring
from finbench.tracks.intraday.audit import audit_intraday
from finbench.tracks.intraday.config import RunConfig
from finbench.tracks.intraday.report import intraday_paper, intraday_report
from finbench.tracks.intraday.show import render_show, task_view
from finbench.tracks.intraday.summary import render_finished
from finbench.tracks.intraday.track import IntradayTrack


class IntradayPlugin(TrackPlugin):
    name = "intraday"
    description = ("will a stock's mid price be higher at 15:55 ET than at the horizon, and an "
                   "80% interval of its log return")
    config_class = RunConfig
    read_columns = {  # docs/spec.md §9
        "tasks.parquet": {"task_id": "text", "ticker": "text", "session": "text",
                          "horizon": "text", "t_forecast": "time", "t_target": "time"},
        "labels.parquet": {"task_id": "text", "p_ref": "number", "p_target": "number",
                           "r": "number", "y": "number", "status": "text"},
    }
    score_files = scoring.SCORE_FILES
    shardable = True
    in_paper = True

    def open(self, config: RunConfig) -> IntradayTrack:
        return IntradayTrack(config)

    def score_inputs(self, run_dir: Path) -> scoring.TaskInputs:
        return scoring.TaskInputs(run_dir)

    def score(self, run_dir: Path, config: RunConfig, *, skipped: dict, inputs=None):
        return scoring.rescore(run_dir, inputs)

    def score_notes(self, config: RunConfig, tasks: int) -> list[str]:
        if config.scores.rows_csv != "auto" or scoring.rows_csv_wanted(config, tasks):
            return []
        return [f"rows.csv left out: the run's rows would not fit a spreadsheet "
                f"({scoring.SPREADSHEET_ROWS:,} rows); rows.parquet holds them ([scores] "
                "rows_csv = true writes the CSV too)"]

    def stance_judge(self, config: RunConfig):
        return config.analysis.stance

    def setting_warnings(self, config: RunConfig) -> list[str]:
        return config.report.warnings()

    def summary(self, run_dir: Path) -> list[str]:
        return render_finished(run_dir)

    def audit(self, run_dir: Path, manifest: dict, config: RunConfig, echo) -> list[str]:
        return audit_intraday(run_dir, manifest, config, echo)

    def report(self, run_dir: Path):
        return intraday_report(run_dir)

    def show(self, run_dir: Path, task_id: str, model: str | None) -> dict:
        return task_view(run_dir, task_id, model)

    def paper(self, run_dirs: list, labels: list[str], out: Path, *,
              allow_different_tasks: bool, echo) -> list[Path]:
        return intraday_paper(run_dirs, labels, out, allow_different_tasks=allow_different_tasks,
                              echo=echo)

    def show_text(self, found: dict) -> str:
        return render_show(found)


PLUGIN = IntradayPlugin()
