"""The event track's plugin (:class:`~finbench.tracks.base.TrackPlugin`): what the shared
commands ask of it, each answered by the module of this package that holds it (imported by
the method that needs it: a run does not load the report's or the audit's)."""

from __future__ import annotations

from pathlib import Path

from finbench.tracks.base import TrackPlugin
from finbench.tracks.events import references  # noqa: F401 - registers its forecaster kinds
from finbench.tracks.events.config import EventRunConfig
from finbench.tracks.events.scores import EVENT_FILES


class EventsPlugin(TrackPlugin):
    name = "events"
    description = "will a resolved prediction market resolve YES, asked at its cutoff t0"
    outcomes = ("NO", "YES")
    cluster_column = "event_group"
    config_class = EventRunConfig
    read_columns = {  # docs/spec.md §11
        "tasks.parquet": {"task_id": "text", "t0": "time"},
        "labels.parquet": {"task_id": "text"},
        "retrieval.parquet": {"task_id": "text", "rank": "number", "post_id": "text",
                              "created_utc": "time"},
    }
    score_files = EVENT_FILES

    def open(self, config: EventRunConfig):
        from finbench.tracks.events.track import EventsTrack

        return EventsTrack(config)

    def check_inputs(self, config) -> None:
        from finbench.tracks.events.slices import slice_files

        slice_files(config)

    def score(self, run_dir: Path, config: EventRunConfig, *, skipped: dict, inputs=None):
        from finbench.runlog.rundir import read_manifest, record_files
        from finbench.tracks.events.scores import write_event_scores

        tables = write_event_scores(run_dir, config, skipped)
        record_files(run_dir, read_manifest(run_dir), list(EVENT_FILES))
        return tables["scores"]

    def summary(self, run_dir: Path) -> list[str]:
        from finbench.tracks.events.summary import render_event_summary

        return [render_event_summary(run_dir)]

    def audit(self, run_dir: Path, manifest: dict, config: EventRunConfig, echo) -> list[str]:
        from finbench.tracks.events.audit import audit_events

        return audit_events(run_dir, manifest, config, echo)

    def report(self, run_dir: Path):
        from finbench.tracks.events.report import event_report

        return event_report(run_dir)

    def board_reference(self, config: EventRunConfig) -> str | None:
        """The config's first reference (the event pilot's market price)."""
        from finbench.tracks.events.config import reference_names

        return next(iter(reference_names(config)), None)

    def show(self, run_dir: Path, task_id: str, model: str | None) -> dict:
        from finbench.tracks.events.show import task_view

        return task_view(run_dir, task_id, model)

    def show_text(self, found: dict) -> str:
        from finbench.tracks.events.show import render_task

        return render_task(found)


PLUGIN = EventsPlugin()
