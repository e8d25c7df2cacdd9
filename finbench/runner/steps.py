"""The steps of :func:`finbench.runner.run`, and what they hand on to each other."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from finbench.core.config import describe_trial, trial_mask
from finbench.core.errors import ModelStopped, RunError
from finbench.core.lookup import positions
from finbench.core.outputs import sync_file, write_atomic, write_json
from finbench.core.version import code_version
from finbench.forecasters.base import Forecaster, build_forecaster
from finbench.forecasters.batch import BatchJob
from finbench.forecasters.judge import StanceJudge
from finbench.runlog.forecast_table import Part, write_forecasts
from finbench.runlog.journal import Journal
from finbench.runlog.rundir import (
    MANIFEST,
    file_hashes,
    now,
    read_manifest,
    receipt,
    settled_files,
)
from finbench.runlog.stances import StanceLog
from finbench.runlog.tool_calls import write_tool_calls
from finbench.runner.forecasting import forecast_pass
from finbench.runner.manifest import code_revisions, describe_code, new_manifest, same_finbench, shard_field
from finbench.runner.revision import Revision, revision
from finbench.runner.scores import rescore
from finbench.tracks import plugin_of
from finbench.tracks.configs import load_config_file, shard_config


def load_run_config(config_path: str | Path, shard: tuple | None
                    ) -> tuple[object, dict]:
    """The config (cut to ``shard``'s dates) and its source: the file's hash, text and
    folder, which the manifest records."""
    config, config_sha, config_text = load_config_file(config_path)
    if shard is not None:
        config = shard_config(config, *shard)
    if not config.models:
        raise RunError(f"{config_path}: no [[models]] configured")
    return config, {"config_sha256": config_sha, "config_toml": config_text,
                    "config_dir": str(Path(config_path).resolve().parent)}


def skip_reason(model) -> str | None:
    """Why a configured model cannot run here (None when it can)."""
    if model.kind == "openai":
        if not os.environ.get(model.api_key_env):
            return f"API key variable {model.api_key_env} is not set"
        if model.base_url_env and not os.environ.get(model.base_url_env):
            return f"endpoint variable {model.base_url_env} is not set"
    return None


def _revision_entry(manifest: dict, change: Revision | None) -> dict:
    """One config revision of a run: its hash, when, and the models it added or dropped."""
    entry = {"config_sha256": manifest.get("config_sha256"),
             "at": manifest.get("started_at") if change is None else now()}
    if change is not None:
        entry.update(added=change.added, removed=change.removed)
    return entry


def _write_tables(out: Path, tables: dict[str, pa.Table]) -> None:
    """Each table as ``out/name``, written whole or not at all (the bytes pandas'
    ``to_parquet`` writes of the frame it came from)."""
    for name, table in tables.items():
        write_atomic(out / name, partial(pq.write_table, table))


def _cpu_seconds() -> float:
    """CPU seconds of this process (all its threads) and of the helper processes it started
    that have ended (the receipts' hashing helper; 0 where the system does not say)."""
    times = os.times()
    return time.process_time() + times.children_user + times.children_system


def _settle(out: Path, unsynced: list[Path]) -> dict[str, str]:
    """The hashes of a run's :func:`settled_files`, once ``unsynced`` are synced."""
    for path in unsynced:
        sync_file(path)
    return file_hashes(out, settled_files(out))


class Laps:
    """Adds the seconds since the last call to ``out[name]``, and to ``cpu[name]`` the CPU
    seconds spent meanwhile by the process (all its threads, and helper processes that ended
    meanwhile) and by the calling thread (nothing where either is None)."""

    def __init__(self, out: dict[str, float] | None,
                 cpu: dict[str, tuple[float, float]] | None = None) -> None:
        self.out, self.cpu = out, cpu
        self.t, self.c, self.m = time.perf_counter(), _cpu_seconds(), time.thread_time()

    def __call__(self, name: str) -> None:
        t, c, m = time.perf_counter(), _cpu_seconds(), time.thread_time()
        if self.out is not None:
            self.out[name] = self.out.get(name, 0.0) + t - self.t
        if self.cpu is not None:
            process, thread = self.cpu.get(name, (0.0, 0.0))
            self.cpu[name] = (process + c - self.c, thread + m - self.m)
        self.t, self.c, self.m = t, c, m


class RunSteps:
    """What one run's steps share, in the order :func:`~finbench.runner.run` calls them.
    The run directory ``out`` is locked by the caller."""

    def __init__(self, config, source: dict, out: Path, *, echo, shard,
                 laps: Laps, rate_share: float = 1.0, trial: dict | None = None,
                 results=None) -> None:
        self.config, self.source, self.out = config, source, out
        self.plugin = plugin_of(config)  # what the track gives the shared steps
        self.rate_share = rate_share
        self.echo, self.shard, self.lap = echo, shard, laps
        # a live horizon's run (a shard naming its horizons, `finbench live`): made at the
        # horizon's time, before any of its tasks' targets
        self.live_horizon = shard is not None and len(shard) > 2
        self.results = results or echo  # the tables and receipt the run ends with
        self.trial = trial  # --models and --limit (None: the whole config)
        self.manifest_path = out / MANIFEST
        self.started, self.old = now(), None
        self.skipped: dict[str, str] = {}   # models not run, with why
        self.stopped: dict[str, str] = {}   # models whose calls cannot succeed, with why
        self.forecasters: list[Forecaster] = []
        self.jobs: dict[str, BatchJob] = {}
        self.todo: dict[str, np.ndarray] = {}
        self.asked: dict[str, np.ndarray] = {}
        self.parts: dict[str, list[Part]] = {}  # the journal parts the forecast pass wrote
        self.notes: dict[str, list[str]] = {}
        self.unscorable: list[str] = []  # why tasks cannot be scored, said when the run ends
        self.pending, self.estimates = 0, {}
        self.waiting: dict[str, int] = {}  # per external agent, the tasks it has not answered
        self.revisions: list[dict] = []  # the run's configs, first to this one
        self.code: list[dict] = []  # the FinBench versions that made the run, first to this
        self.label_files: Future | None = None  # the label pass's tables being written
        self.task_inputs = None  # what scoring reads of tasks and labels (the track's)
        self.hashes: dict[str, str] = {}  # files' hashes made while scoring (:meth:`score`)
        self.unsynced: list[Path] = []  # files written without fsync, synced while scoring

    def close(self) -> None:
        """Let go of what the run holds open (the journal's transcripts database, the track's
        reads), once the label pass's files are written (a run failing keeps its own
        error)."""
        journal = getattr(self, "journal", None)
        if journal is not None:
            journal.close()
        track = getattr(self, "track", None)
        if track is not None:  # e.g. a run failing before its label pass: its reads stop
            track.release()
        if self.label_files is not None:
            self.label_files.exception()

    def _label_files_ok(self) -> bool:
        """Whether the tasks and labels files are written, without error."""
        files = self.label_files
        return files is not None and files.done() and files.exception() is None

    def label_files_written(self) -> None:
        """Wait for the label pass's tables (:meth:`label`); raise what writing them raised."""
        if self.label_files is not None:
            self.label_files.result()

    def check_directory(self) -> None:
        """A directory holding a run resumes only the same config and shard."""
        if not self.manifest_path.is_file():
            return
        old = self.old = read_manifest(self.out)
        self.revisions = old.get("config_revisions") or [_revision_entry(old, None)]
        if old.get("config_sha256") != self.source["config_sha256"]:
            self._revise(old)
        if old.get("shard") != shard_field(self.shard):
            raise RunError(f"{self.out}: holds shard {old.get('shard')}, not "
                           f"{shard_field(self.shard)}")
        if old.get("trial") != self.trial:
            raise RunError(f"{self.out}: holds {describe_trial(old.get('trial'))}, not "
                           f"{describe_trial(self.trial)}: a trial and a full run (or two "
                           "trials) never share a folder; use another --out")
        self.started = old.get("started_at", self.started)
        self._code_revision(old)

    def _code_revision(self, old: dict) -> None:
        """A run resumed by another FinBench (version or git revision) than the one that made
        it last goes on, keeping what was made; the manifest's ``code_revisions`` lists each
        FinBench with when it took over, and the run says so."""
        ours = code_version()
        self.code = code_revisions(old)
        last = self.code[-1]
        if not same_finbench(last, ours):
            self.code = [*self.code, {**ours, "at": now()}]
            self.echo(f"{self.out}: made so far by {describe_code(last)}, resumed by "
                      f"{describe_code(ours)}: what it made is kept, what is made now is this "
                      "one's (the manifest's code_revisions lists both)")

    def _revise(self, old: dict) -> None:
        """A changed config extends the run when it only adds models or removes models never
        started; the revision is recorded. Anything else is refused, naming the keys."""
        change = revision(old.get("config", {}), self.config)
        if not change.allowed:
            keys = ", ".join(change.differing[:8]) + (" ..." if len(change.differing) > 8
                                                       else "")
            raise RunError(f"{self.out}: holds a run of a different config "
                           f"({old.get('config_sha256', '?')[:12]}): {keys} differ; a run may "
                           "only gain models (or lose models never started) when run again: "
                           "use another --out")
        answered = Journal(self.out).done_by_model()
        started = [name for name in change.removed if answered.get(name)]
        if started:
            raise RunError(f"{self.out}: the config drops model(s) {', '.join(started)}, whose "
                           f"answers are in the run ({len(answered[started[0]])} for "
                           f"{started[0]}); keep them in the config, or use another --out")
        self.revisions = [*self.revisions, _revision_entry(
            {**self.source, "config": json.loads(self.config.model_dump_json())}, change)]
        self.echo(f"{self.out}: the config's text changed; the run gains model(s) "
                  f"{', '.join(change.added) or 'none'}"
                  + (f" and drops {', '.join(change.removed)} (never started)"
                     if change.removed else "") + "; labels and answers already made are kept")

    def open_track(self) -> None:
        """The config's track, its tasks planned; a resumed run must see the same data."""
        self.track = self.plugin.open(self.config)
        seen = (self.old or {}).get("data", {}).get("snapshot_sha256")
        now_sha = self.track.snapshot_sha256
        if seen is not None and seen != now_sha:
            raise RunError(f"{self.out}: its run saw data snapshot {seen[:12]}, but "
                           f"{self.config.data.store} is now {now_sha[:12]} (its data or "
                           "settings changed); one run never mixes two snapshots: use another "
                           "--out, or restore the store")

    def build_forecasters(self) -> None:
        for model in self.config.models:
            reason = skip_reason(model)
            if reason:
                self.skipped[model.name] = reason
            else:
                forecaster = build_forecaster(model, self.track.prompt)
                if hasattr(forecaster, "rate_share"):
                    forecaster.rate_share = self.rate_share
                external = getattr(forecaster, "external", False)
                if external:  # an agent answering over MCP: its sessions are in the run
                    forecaster.run_dir = self.out
                if getattr(model, "tools", None) or external:  # the track's tools, or refused
                    forecaster.use_tools(self.track.tools())
                self.forecasters.append(forecaster)
        self.lap("plan")

    def label(self) -> None:
        """The label pass; the tasks, labels and a first manifest are written."""
        track, echo = self.track, self.echo
        labels = track.label(contexts=any(f.needs_context for f in self.forecasters),
                             echo=echo)
        try:
            warnings = track.warnings(labels)
        except RunError:
            if not self.live_horizon:
                raise
            warnings = []  # a live horizon's run is made before its targets: none has a label
        for warning in warnings + self._setting_warnings():
            echo(f"warning: {warning}")
        self.unscorable = track.unscorable_notes(labels)
        facts = track.summary(labels)
        data = track.data_facts()
        echo(f"{'SYNTHETIC ' if data['synthetic'] else ''}data {data['store']} (snapshot "
             f"{data['snapshot_sha256'][:12]}): {len(track.tasks)} tasks, excluded "
             f"{facts['excluded'] or 'none'}, labels {facts['labels']}")
        # the tables as their writer thread writes them, while the forecasts are made
        tables = {"tasks.parquet": track.tasks, "labels.parquet": labels, **track.outputs()}
        writer = ThreadPoolExecutor(1, thread_name_prefix="label-files")
        self.label_files = writer.submit(_write_tables, self.out, {
            name: frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(
                frame, preserve_index=False) for name, frame in tables.items()})
        writer.shutdown(wait=False)  # its thread ends when the tables are written
        self.manifest = new_manifest(self.config, self.source, data, facts, self.started)
        self.manifest["shard"] = shard_field(self.shard)
        if self.trial is not None:
            self.manifest["trial"] = self.trial
            echo(f"{self.out}: {describe_trial(self.trial)}")
        self.manifest["config_revisions"] = self.revisions or [
            _revision_entry(self.manifest, None)]
        self.manifest["code_revisions"] = self.code or code_revisions(self.manifest)
        write_json(self.manifest_path, self.manifest)
        self.lap("label pass")

    def _setting_warnings(self) -> list[str]:
        return self.plugin.setting_warnings(self.config)

    def collect_batches(self, *, batch: bool, dry_run: bool) -> None:
        """Open the journal; collect what batches sent earlier have answered."""
        self.journal = Journal(self.out)
        for name, reason in self.skipped.items():
            self.echo(f"skip {name}: {reason}")
        jobs = {f.name: BatchJob(self.out, f) for f in self.forecasters if f.streaming}
        self.jobs = {name: job for name, job in jobs.items() if batch or job.state["files"]}
        for name, job in self.jobs.items() if not dry_run else ():
            try:
                self.pending += job.collect(self.journal, self.echo)
            except ModelStopped as exc:
                self._stop(name, exc)

    def find_work(self, *, dry_run: bool) -> None:
        """Per forecaster: the tasks it is asked and has not answered (nor sent in a
        batch)."""
        done, ids = self.journal.done_by_model(), self.track.tasks["task_id"]
        errors = self.journal.open_errors()
        askable = self.track.askable()
        for f in self.forecasters:
            sent = sorted(self.jobs[f.name].submitted_task_ids()) if f.name in self.jobs else []
            finished = [*done.get(f.name, []), *sent]
            retry = self._retries(f, errors.get(f.name, {}))
            if retry:
                finished = [t for t in finished if t not in retry]
            asked = self.asked[f.name] = f.asked(self.track.tasks) & askable & trial_mask(
                len(ids), (self.trial or {}).get("limit"))
            self.todo[f.name] = asked & (positions(ids, finished) < 0) if finished else asked
            self.notes[f.name] = [*f.notes(self.track.tasks), *([] if asked.all() else [
                f"asked {int(asked.sum())} of the run's {len(ids)} tasks; the others are not "
                "asked (no forecast row)"])]
            for note in self.notes[f.name]:
                self.echo(f"{f.name}: {note}")
            if not self.todo[f.name].any() and not dry_run:
                self.echo(f"{f.name}: all {int(asked.sum())} forecasts already in the journal")

    def _retries(self, f: Forecaster, failed: dict[str, int]) -> set[str]:
        """The tasks of ``f`` whose calls got no answer and that have attempts left: asked
        again (the forecaster numbers the new attempt)."""
        if hasattr(f, "attempts_before"):
            f.attempts_before = failed
        most = getattr(f.config, "max_attempts", 1)
        retry = {task for task, n in failed.items() if n < most}
        final = len(failed) - len(retry)
        if retry:
            self.echo(f"{f.name}: asking again {len(retry)} tasks whose calls got no answer "
                      f"(attempts left of {most})")
        if final:
            self.echo(f"{f.name}: {final} tasks got no answer in {most} attempts: final, "
                      "status error (raise max_attempts to ask them again)")
        return retry

    def forecast(self, *, batch: bool, dry_run: bool) -> None:
        """Every forecaster answers what it owes; answers are journalled as they come. On
        failure, the answers already made land in the journal first."""
        try:
            self.estimates = forecast_pass(
                self.track, self.forecasters, self.todo, self.jobs, self.journal, self.echo,
                dry_run=dry_run, batch=batch, stopped=self.stopped, asked=self.asked,
                parts=self.parts)
            if not dry_run and not batch and self._label_files_ok():
                # scoring's reads of tasks and labels, while the journal's last parts are
                # written (a failed write of them is raised after the journal's own errors)
                self.task_inputs = self.plugin.score_inputs(self.out)
            self.journal.flush()
        except BaseException as error:
            for late in self.journal.settle():  # answers made before the error land first
                error.add_note(f"also failed while stopping: writing a journal part: {late!r}")
            raise
        self.waiting = {f.name: f.waiting for f in self.forecasters
                        if getattr(f, "waiting", 0) and f.name not in self.stopped}
        self.track.release()  # what follows reads the run directory
        self.track.check_unchanged()  # what was read is the snapshot the run recorded
        self.lap("forecasts")

    def _parts_of_table(self, names: list[str]) -> list[Part] | None:
        """The journal parts that make the forecast table, in its order, when baselines alone
        answered every task they are asked in this run (nothing resumed, nothing skipped):
        each part is one of its row groups. None otherwise (the table is written from the
        journal)."""
        fresh = (self.forecasters and not any(f.needs_context for f in self.forecasters)
                 and [f.name for f in self.forecasters] == names
                 and all((self.todo[n] == self.asked[n]).all() for n in names)
                 and all(n in self.parts for n in names))
        return [part for n in names for part in self.parts[n]] if fresh else None

    def submit_batches(self, *, batch: bool, dry_run: bool) -> None:
        if not batch or dry_run:
            return
        for name, job in self.jobs.items():
            if job.new and name not in self.stopped:
                self.pending += len(job.write_files())
                try:
                    job.submit(self.echo)
                except ModelStopped as exc:
                    self._stop(name, exc)

    def print_estimates(self) -> None:
        external = {m.name for m in self.config.models if m.kind == "mcp"}
        for name, est in self.estimates.items():
            if name in external:
                self.results(f"dry run {name}: {est['calls']} tasks for an agent over MCP "
                             "(`finbench tools serve`); FinBench makes no model call")
                continue
            cost = "unknown (no prices configured)" if est["cost"] is None else (
                f"${est['cost']:.4f}")
            turns = self._turns.get(name)
            assumed = (f" (an agent: each task taken as {turns} turns, its max_turns, each "
                       "sending its prompt again; what its tools answer is not counted)"
                       if turns else "")
            self.results(f"dry run {name}: {est['calls']} calls, ~{est['tokens_in']} input "
                         f"+ ~{est['tokens_out']} output tokens, estimated cost {cost}"
                         + assumed)

    @property
    def _turns(self) -> dict[str, int]:
        """Per agent, the turns a dry run takes each of its tasks to take."""
        return {m.name: m.max_turns for m in self.config.models if getattr(m, "tools", None)}

    def print_pending(self) -> None:
        self.echo(f"{self.pending} batch(es) not finished yet: run the same command again to "
                  "collect them; forecasts and scores are written once every batch is in")

    def print_waiting(self) -> None:
        for name, count in self.waiting.items():
            self.echo(f"{name}: {count} task(s) wait for the agent: serve each with `finbench "
                      f"tools serve {self.out} --model '{name}' --task ID` (`finbench tools "
                      f"tasks {self.out}` lists them), then run the same command again; "
                      "forecasts and scores are written once no task waits")

    def write_forecast_table(self) -> None:
        """The forecast table (models stopped are scored as if skipped; the answers they
        gave stay in the journal) and the manifest's account of the models."""
        self.skipped.update({name: f"stopped: {why}" for name, why in self.stopped.items()})
        names = self._names()
        parts = self._parts_of_table(names)
        if parts is not None:  # synced while the run scores (:meth:`score`)
            write_forecasts(self.out / "forecasts.parquet", parts, synced=False)
            self.unsynced.append(self.out / "forecasts.parquet")
        else:
            self.journal.write_ordered(self.out / "forecasts.parquet",
                                       self.track.tasks["task_id"].to_numpy(object), names)
        agents = [f.name for f in self.forecasters
                  if getattr(f.config, "tools", None) and f.name in names]
        if agents:  # every tool call's receipt, gathered from the agents' rows
            write_tool_calls(self.out, agents)
        self.unanswered = self._unanswered()
        self.manifest.update(skipped_models=self.skipped, stopped_models=self.stopped,
                             model_notes={k: v for k, v in self.notes.items() if v},
                             unanswered=self.unanswered)
        write_json(self.manifest_path, self.manifest)
        self.lap("forecast table")

    def probe(self) -> None:
        """The recall probes of the models that ask them (:mod:`finbench.runner.probes`),
        answered and gathered into ``probes.parquet``."""
        from finbench.runner.probes import ask_probes, probed_models

        if not probed_models(self.config):
            return
        unasked = ask_probes(self.track, self.config, self.out, self.asked,
                             {*self.skipped, *self.stopped}, self.echo)
        if unasked:
            self.manifest["probes_unfinished"] = unasked
            write_json(self.manifest_path, self.manifest)
        self.lap("recall probes")

    def min_k(self) -> None:
        """The Min-K% probability of each task's text for the models that ask for it
        (:mod:`finbench.runner.min_k`), written to ``min_k.parquet``."""
        from finbench.runner.min_k import measure_min_k, min_k_models

        if not min_k_models(self.config):
            return
        unsupported = measure_min_k(self.config, self.out, {*self.skipped, *self.stopped},
                                    self.echo)
        if unsupported:
            self.manifest["min_k_unsupported"] = {
                **self.manifest.get("min_k_unsupported", {}), **unsupported}
            write_json(self.manifest_path, self.manifest)
        self.lap("min-k")

    def _unanswered(self) -> dict[str, dict[str, int]]:
        """Per model, its tasks whose calls got no answer (status error): how many will be
        asked again by the next run, and how many are final (out of attempts)."""
        most = {f.name: getattr(f.config, "max_attempts", 1) for f in self.forecasters}
        out = {}
        for model, failed in self.journal.open_errors().items():
            if model in most:
                final = sum(n >= most[model] for n in failed.values())
                out[model] = {"retry": len(failed) - final, "final": final}
        return out

    def judge_stances(self) -> None:
        """With ``[analysis.stance] method = "judge"``: the judge reads the stance of every
        rationale it has not read yet (journalled in ``stances.jsonl``)."""
        spec = self.plugin.stance_judge(self.config)
        if spec is None or spec.method != "judge":
            return
        reason = skip_reason(spec.judge)
        if reason:
            self.echo(f"skip stance judge {spec.judge.name}: {reason}")
            self.manifest["stance_judge"] = {"skipped": reason}
            return
        table = pq.read_table(self.out / "forecasts.parquet",
                              columns=["task_id", "model", "rationale"])
        rows = table.filter(pc.is_valid(table.column("rationale"))).to_pandas()
        judge, log = StanceJudge(spec.judge, self.track.prompt), StanceLog(self.out)
        judge.rate_share = self.rate_share  # a shard's judge keeps to its share, as its models
        try:
            judge.judge(log, rows, self.echo)
        except ModelStopped as exc:
            self.echo(f"STOPPED stance judge: {exc}")
            self.manifest["stance_judge"] = {"stopped": str(exc)}
            return
        finally:
            log.transcripts.close()
        self.manifest["stance_judge"] = {"method": judge.method, "rationales": len(rows)}
        self.lap("stance judge")

    def score(self) -> None:
        """Scores and rows written; meanwhile the files no later step writes are synced
        (those written without) and hashed for the manifest (:meth:`finish`)."""
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hashing") as pool:
            hashing = pool.submit(_settle, self.out, self.unsynced)
            self.scores = rescore(self.out, self.task_inputs)
            # and those of the score files, as scoring just recorded them
            recorded = read_manifest(self.out).get("files", {})
            self.hashes = {**hashing.result(), **{n: recorded[n] for n in
                                                  self.plugin.score_files if n in recorded}}
        for note in self.plugin.score_notes(self.config, len(self.track.tasks)):
            self.echo(note)
        self.lap("scores")

    def settle(self) -> None:
        """For a run that writes no scores (a cluster's shard): the files no later step
        writes synced and hashed for the manifest, as :meth:`score` does beside scoring."""
        self.hashes = _settle(self.out, self.unsynced)
        self.lap("scores")

    def finish(self, *, scored: bool = True) -> None:
        """Every file's content hash into the manifest (for the audit); the summary and the
        manifest's receipt printed."""
        self.manifest.update(finished_at=now())
        files = {**(self.manifest.get("files") or {}), **file_hashes(self.out, None, self.hashes)}
        self.manifest["files"] = dict(sorted(files.items()))
        old = self.old
        if old is not None and {**self.manifest, "finished_at": old.get("finished_at")} == old:
            self.manifest = old  # a resume that changed nothing: the manifest, and its receipt
        write_json(self.manifest_path, self.manifest)
        if scored:
            for block in self.plugin.summary(self.out):  # what a merge of its shards prints too
                self.results(block)
        else:
            self.results(f"{self.out}: not scored (its merge scores it; alone: finbench score)")
        for line in self.unscorable:
            self.results(line)
        self.results(receipt(self.out))
        for why in self.stopped.values():
            self.echo(f"STOPPED {why}")
        for model, count in self.unanswered.items():
            if count["retry"]:
                self.echo(f"{model}: {count['retry']} calls got no answer (status error, not "
                          "counted in validity): give the same command again to ask them")
        self.lap("manifest")

    def _names(self) -> list[str]:
        """The models scored: those configured, less those skipped or stopped."""
        return [m.name for m in self.config.models
                if m.name not in self.skipped and m.name not in self.stopped]

    def _stop(self, name: str, exc: ModelStopped) -> None:
        self.stopped[name] = str(exc)
        self.echo(f"STOPPED {exc}")
