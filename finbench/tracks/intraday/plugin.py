"""The intraday track's plugin (:class:`~finbench.tracks.base.TrackPlugin`): what the shared
commands ask of it, each answered by the module that holds it. Those modules are imported by
the method that needs them, so a run does not load the report's (matplotlib) or the audit's."""

from __future__ import annotations

from pathlib import Path

from finbench.tracks.base import TrackPlugin
from finbench.tracks.intraday import baselines  # noqa: F401 - registers its forecaster kinds
from finbench.tracks.intraday.config import RunConfig
from finbench.tracks.intraday.scores import SCORE_FILES
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
    score_files = SCORE_FILES
    shardable = True
    in_paper = True
    outcomes = ("down", "up")
    cluster_column = "session"

    def open(self, config: RunConfig) -> IntradayTrack:
        return IntradayTrack(config)

    def score_inputs(self, run_dir: Path):
        from finbench.tracks.intraday.scores import TaskInputs

        return TaskInputs(run_dir)

    def score(self, run_dir: Path, config: RunConfig, *, skipped: dict, inputs=None):
        from finbench.tracks.intraday.scores import rescore

        return rescore(run_dir, inputs)

    def score_notes(self, config: RunConfig, tasks: int) -> list[str]:
        from finbench.tracks.intraday.scores import SPREADSHEET_ROWS, rows_csv_wanted

        if config.scores.rows_csv != "auto" or rows_csv_wanted(config, tasks):
            return []
        return [f"rows.csv left out: the run's rows would not fit a spreadsheet "
                f"({SPREADSHEET_ROWS:,} rows); rows.parquet holds them ([scores] "
                "rows_csv = true writes the CSV too)"]

    def stance_judge(self, config: RunConfig):
        return config.analysis.stance

    def check_inputs(self, config: RunConfig) -> None:
        from finbench.tracks.intraday.slices import slice_files

        slice_files(config)

    def live_settings(self, config: RunConfig):
        return config.live

    def setting_warnings(self, config: RunConfig) -> list[str]:
        return config.report.warnings()

    def summary(self, run_dir: Path) -> list[str]:
        from finbench.tracks.intraday.summary import render_finished

        return render_finished(run_dir)

    def audit(self, run_dir: Path, manifest: dict, config: RunConfig, echo) -> list[str]:
        from finbench.tracks.intraday.audit import audit_intraday

        return audit_intraday(run_dir, manifest, config, echo)

    def report(self, run_dir: Path):
        from finbench.tracks.intraday.report import intraday_report

        return intraday_report(run_dir)

    def paper(self, run_dirs: list, labels: list[str], out: Path, *,
              allow_different_tasks: bool, echo) -> list[Path]:
        from finbench.tracks.intraday.report import intraday_paper

        return intraday_paper(run_dirs, labels, out, allow_different_tasks=allow_different_tasks,
                              echo=echo)

    def board_reference(self, config: RunConfig) -> str | None:
        """As the report's skill: the model named ``coin``, else the first baseline."""
        from finbench.tracks.intraday.config import BASELINE_KINDS
        from finbench.tracks.intraday.report_data import default_reference

        return default_reference([m.name for m in config.models if m.kind in BASELINE_KINDS])

    def show(self, run_dir: Path, task_id: str, model: str | None) -> dict:
        from finbench.tracks.intraday.show import task_view

        return task_view(run_dir, task_id, model)

    def show_text(self, found: dict) -> str:
        from finbench.tracks.intraday.show import render_show

        return render_show(found)


PLUGIN = IntradayPlugin()
