"""One run, as its steps (docs/spec.md §9): each step is a method of
:class:`~finbench.runner.steps.RunSteps`, which holds what the steps hand on."""

from __future__ import annotations

from pathlib import Path

from finbench.core.config import trial_config
from finbench.core.errors import ConfigError
from finbench.core.folder_lock import describe
from finbench.core.location import is_uri
from finbench.runlog.mirror import Mirror, scratch_folder
from finbench.runlog.runlock import RunLock
from finbench.runner.steps import Laps, RunSteps, load_run_config
from finbench.tracks import plugin_of


def run(config_path: str | Path, out: str | Path | None = None, *, echo=print,
        dry_run: bool = False, shard: tuple | None = None, batch: bool = False,
        timings: dict[str, float] | None = None, rate_share: float = 1.0,
        cpu_timings: dict[str, tuple[float, float]] | None = None,
        models: list[str] | None = None, limit: int | None = None,
        results=None, score: bool = True) -> Path | str:
    """Run (or resume) the config into ``out`` (default ``results/<config name>``); returns
    the run directory.

    ``models`` and ``limit`` make a trial: only the models named, each asked the run's first
    ``limit`` tasks; it goes into a folder of its own (default
    ``results/<config name>-trial``), which a full run never resumes, nor a trial of other
    settings. ``echo`` takes what the run says as it goes (progress, warnings), ``results``
    the tables and the receipt it ends with (by default ``echo`` too).

    ``dry_run`` prints, per LLM model, the calls still to make with estimated tokens and
    cost, and stops before any request. ``shard = (start, end)`` runs only the sessions of
    that sub-range of the config's dates (:mod:`finbench.shards`). ``batch`` sends LLM calls
    through the Batch API; a later run of the same directory collects them and scores once
    every batch is in. ``timings``, when given, receives the seconds each step took, and
    ``cpu_timings`` the CPU seconds each step spent, in all threads (and helper processes)
    and in the caller's.
    ``rate_share``: the part of each LLM model's rate limits this run may use (a shard among
    others running at once, :mod:`finbench.cluster`). ``score=False`` (a shard whose merge
    scores every row again, as a cluster's are) writes no score files: the run ends with its
    forecast table, and `finbench score` scores it later. ``out`` may be a folder on object
    storage (``s3://bucket/runs/x``): the run works in a local scratch folder that is kept
    mirrored there (:mod:`finbench.runlog.mirror`), and the URI is returned.
    Market data are read a date partition at a time and forecasts are journalled as they
    come, so memory grows with the number of tasks, not of forecast rows, and a killed run
    loses nothing it wrote.
    """
    if out is not None and is_uri(out):  # object storage: run in scratch, mirrored there
        with scratch_folder(str(out).rstrip("/").rsplit("/", 1)[-1]) as tmp:
            with Mirror(Path(tmp) / "run", str(out)) as mirror:
                run(config_path, mirror.local, echo=echo, dry_run=dry_run, shard=shard,
                    batch=batch, timings=timings, rate_share=rate_share,
                    cpu_timings=cpu_timings, models=models, limit=limit, results=results,
                    score=score)
        return out
    config, source = load_run_config(config_path, shard)
    trial = trial_of(models, limit, shard)
    if trial is not None:
        config = trial_config(config, trial["models"])
        if trial["models"]:  # named in the config's order, however the command gave them
            trial["models"] = [m.name for m in config.models]
    agents = [m.name for m in config.models if getattr(m, "tools", None)]
    external = [m.name for m in config.models if m.kind == "mcp"]
    if batch and external:
        raise ConfigError(f"--batch: {', '.join(external)} answer over MCP (`finbench tools "
                          "serve`), not through the Batch API: run without --batch")
    if batch and agents:
        raise ConfigError(f"--batch: {', '.join(agents)} call tools, turn by turn; the Batch "
                          "API answers one request a task: run them without --batch")
    sampled = [m.name for m in config.models if getattr(m, "prompt", None) is not None
               and m.prompt.samples > 1]
    if batch and sampled:
        raise ConfigError(f"--batch: {', '.join(sampled)} ask each task several times "
                          "(prompt.samples); the Batch API answers one request a task: run "
                          "them without --batch")
    plugin_of(config).check_inputs(config)  # a bad slice file: named, no folder made
    stem = Path(config_path).stem + ("-trial" if trial is not None else "")
    out = Path(out) if out else Path("results") / stem
    with RunLock(out, command=f"finbench run {config_path}") as lock:
        if lock.took_over:
            echo(f"{out}: taking over from {describe(lock.took_over)}, which ended without "
                 "releasing the folder (killed?); resuming its run")
        steps = RunSteps(config, source, out, echo=echo, shard=shard,
                         laps=Laps(timings, cpu_timings), rate_share=rate_share,
                         trial=trial, results=results or echo)
        try:
            _steps(steps, batch=batch, dry_run=dry_run, score=score)
        finally:
            steps.close()  # the transcripts' database, before the folder is let go
    return out


def _steps(steps: RunSteps, *, batch: bool, dry_run: bool, score: bool = True) -> None:
    """A run's steps in order (the caller holds the folder's lock)."""
    steps.check_directory()        # a resumed run: same config, shard and data
    steps.open_track()             # tasks planned; no market data read yet
    steps.build_forecasters()      # models that cannot run here are skipped, with why
    steps.label()                  # the label pass; tasks, labels and manifest written
    steps.collect_batches(batch=batch, dry_run=dry_run)
    steps.find_work(dry_run=dry_run)  # what each forecaster still owes
    steps.forecast(batch=batch, dry_run=dry_run)  # answers journalled as they come
    steps.submit_batches(batch=batch, dry_run=dry_run)
    steps.label_files_written()
    if dry_run:
        steps.print_estimates()
        return
    if steps.pending or steps.waiting:
        if steps.pending:
            steps.print_pending()
        steps.print_waiting()
        return
    steps.write_forecast_table()
    steps.probe()                  # with recall_probe: each task's outcome from memory
    steps.min_k()                  # with min_k_percent: each task's text, Min-K% probability
    steps.judge_stances()          # with [analysis.stance] method = "judge"
    if score:
        steps.score()
    else:
        steps.settle()             # files synced and hashed; no score file written
    steps.finish(scored=score)


def trial_of(models: list[str] | None, limit: int | None, shard) -> dict | None:
    """A trial's settings as the manifest records them (None: a full run)."""
    if not models and limit is None:
        return None
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit: {limit} is not a number of tasks >= 1")
    if shard is not None:
        raise ConfigError("--models and --limit make a trial of the whole config; give them "
                          "without --shard")
    return {"models": list(models) if models else None, "limit": limit}
