"""The ``finbench`` command line: thin commands over the library API (docs/spec.md §9)."""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sys
from functools import partial
from pathlib import Path

from finbench.core.blas import one_blas_thread
from finbench.core.errors import FinbenchError
from finbench.core.memory import keep_freed_memory
from finbench.core.version import describe_version
from finbench.tracks.commands import seed_argument, track_commands


def _data_ingest(args: argparse.Namespace) -> int:
    from finbench.data.ingest import ingest_files

    for commands in track_commands():  # a track's own store (e.g. --markets, --posts)
        done = commands.data_command("ingest", args)
        if done is not None:
            return done
    did = "would ingest" if args.dry_run else "ingested"
    if not args.file and not args.headlines:
        raise FinbenchError("data ingest: give a bars FILE, --headlines FILE, or both (or "
                            "--markets/--posts for an event store)")
    done = ingest_files(args.out, bars=args.file, headlines=args.headlines, ticker=args.ticker,
                        timezone=args.timezone, bar_timestamp=args.bar_timestamp,
                        bar_seconds=args.bar_seconds, dry_run=args.dry_run)
    if args.headlines:
        summary = done["headlines"]
        print(f"{did} {summary['rows']} headlines into {args.out}"
              + (f", replacing {summary['replaced']} stored headline(s) with the same id"
                 if summary["replaced"] else ""))
        if summary["ids_made"]:
            print("  ids made from each headline's published_at, tickers, headline and source "
                  "(a file without an id column; docs/data.md)")
    if args.file:
        summary = done["bars"]
        print(f"{did} {summary['rows']} bars of {', '.join(summary['tickers'])} into "
              f"{args.out} ({len(summary['partitions'])} date partition(s))")
        for warning in summary["warnings"]:
            print(f"warning: {warning}", file=sys.stderr)
        replaced = summary["replaced"]
        for r in replaced[:20]:
            print(f"  {'would replace' if args.dry_run else 'replaced'} {r['ticker']} on "
                  f"{r['date']}: {r['stored']} stored bar(s) by {r['new']}")
        if len(replaced) > 20:
            print(f"  ... and {len(replaced) - 20} more ticker-days replaced")
    if args.dry_run:
        print("dry run: nothing was written")
        return 0
    from finbench.data.store import Store

    print(f"snapshot sha256 {Store(args.out).snapshot_sha256}")
    return 0


def _progress(line: str) -> None:
    """Progress of a check goes to stderr, with the problems; stdout keeps the verdict."""
    print(line, file=sys.stderr, flush=True)


def _failed(problems: list[str], verdict: str) -> bool:
    """Each problem, then the verdict, on stderr; whether there were any."""
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        print(verdict, file=sys.stderr)
    return bool(problems)


def _data_validate(args: argparse.Namespace) -> int:
    from finbench.data.store import Store

    for commands in track_commands():  # a track's own store
        done = commands.data_command("validate", args)
        if done is not None:
            return done
    store = Store(args.store)
    problems = store.verify(echo=_progress)
    label = " (SYNTHETIC data)" if store.synthetic else ""
    if _failed(problems, f"{args.store}: {len(problems)} problem(s){label}"):
        return 1
    n_bars = len(store.dates("bars"))
    print(f"{args.store}: valid{label}; {n_bars} bar dates, "
          f"{len(store.dates('headlines'))} headline dates; snapshot {store.snapshot_sha256}")
    return 0


def _data_copy(args: argparse.Namespace) -> int:
    from finbench.core.errors import StoreError
    from finbench.core.location import copy_tree
    from finbench.data.commit import unfinished
    from finbench.data.store import Store
    from finbench.runlog.mirror import copied

    problem = unfinished(args.source)
    if problem:
        raise StoreError(problem)
    if args.layout == "ticker":
        from finbench.data.by_ticker import copy_by_ticker

        copy = copy_by_ticker(args.source, args.target, echo=_progress)
        print(f"copied {args.source} to {args.target}, laid out by ticker: "
              f"{len(copy.ticker_files)} tickers, {len(copy.manifest['partitions'])} files; "
              f"store snapshot {copy.snapshot_sha256}")
        return 0
    names = copy_tree(args.source, args.target, skip=lambda rel: not copied(rel), others=False)
    said = f"copied {len(names)} files from {args.source} to {args.target}"
    try:
        said += f"; store snapshot {Store(args.target).snapshot_sha256}"
    except StoreError:  # a run directory or an event store: copied, nothing more to say
        pass
    print(said)
    return 0


def _data_synth(args: argparse.Namespace) -> int:
    from finbench.data.synth import write_sample

    store = write_sample(args.out, seed=args.seed)
    print(f"wrote SYNTHETIC sample store {args.out} (seed {args.seed}); "
          f"snapshot {store.snapshot_sha256}")
    return 0


def _data_fetch(args: argparse.Namespace) -> int:
    from finbench.data.fetch import fetch
    from finbench.data.vendors.base import get_vendor

    vendor = get_vendor(args.source, feed=args.feed)
    tickers = [t.strip() for t in args.tickers.split(",")]  # an empty entry is named
    summary = fetch(vendor, tickers, args.start, args.end, args.out, echo=_progress)
    print(f"{args.source}: fetched {summary['fetched']} ticker-days ({summary['rows']} bars), "
          f"{summary['skipped']} already present; snapshot {summary['snapshot_sha256']}")
    return 0


def _tasks(args: argparse.Namespace) -> int:
    from finbench.core.errors import RunError
    from finbench.runlog.rundir import MANIFEST
    from finbench.tracks import open_track
    from finbench.tracks.configs import load_config

    if args.out and (Path(args.out) / MANIFEST).is_file():
        raise RunError(f"{args.out}: holds {MANIFEST} (a run's or a store's), whose tasks and "
                       "labels are its own; `finbench tasks` writes into a folder of its own")
    track = open_track(load_config(args.config))
    try:
        tasks, labels = track.tasks, track.label(contexts=False, echo=_progress)  # stdout: JSON
        facts = track.summary(labels)
    finally:
        track.release()
    out = Path(args.out) if args.out else None
    if out:
        from finbench.core.outputs import write_atomic
        from finbench.runlog.runlock import RunLock

        with RunLock(out, command="finbench tasks"):
            write_atomic(out / "tasks.parquet", partial(tasks.to_parquet, index=False))
            write_atomic(out / "labels.parquet", partial(labels.to_parquet, index=False))
    print(json.dumps(facts, indent=2))
    return 0


def _run(args: argparse.Namespace) -> int:
    from finbench.core.location import read_file
    from finbench.runner import run

    shard = None
    if args.shard:
        start, sep, end = args.shard.partition(":")
        if not sep:
            raise FinbenchError(f"--shard: {args.shard!r} is not START:END (YYYY-MM-DD:YYYY-MM-DD)")
        shard = (start, end)
    from finbench.cluster import chosen_executor
    from finbench.tracks.configs import load_config_file

    executor = chosen_executor(load_config_file(args.config)[0], kind=args.executor,
                               scheduler=args.scheduler, workers=args.workers)
    models = [m.strip() for m in args.models.split(",")] if args.models is not None else None
    if executor.kind == "dask":
        if shard or args.batch or args.dry_run or models or args.limit is not None:
            said = "--executor dask" if args.executor else "the config's [executor] kind = \"dask\""
            other = "" if args.executor else " (or give --executor local)"
            raise FinbenchError(f"{said} runs the whole config as month shards: give it "
                                f"without --shard, --batch, --dry-run, --models or "
                                f"--limit{other}")
        from finbench.cluster import run_on_dask

        out = run_on_dask(args.config, args.out or Path("results") / Path(args.config).stem,
                          scheduler=executor.scheduler, workers=executor.workers,
                          months=executor.months, echo=_progress, results=print)
        print(f"run directory: {out}")
        return 0
    out = run(args.config, args.out, dry_run=args.dry_run, shard=shard, batch=args.batch,
              models=models, limit=args.limit, echo=_progress, results=print)
    print(f"run directory: {out}" + (" (dry run: no calls made)" if args.dry_run else ""))
    stopped = json.loads(read_file(out, "manifest.json")).get("stopped_models") or {}
    for why in stopped.values():
        print(f"ModelStopped: {why}", file=sys.stderr)
    return 1 if stopped else 0


def _score(args: argparse.Namespace) -> int:
    from finbench.core.version import ENGINE_VERSION
    from finbench.runlog.mirror import local_copy
    from finbench.runner.scores import score_digest, score_run

    with local_copy(args.run, write_back=True) as run_dir:
        scores = score_run(run_dir)
        digest = score_digest(run_dir)
    print(f"{args.run}: {len(scores)} score rows written to scores.parquet and scores.csv")
    print(f"scores digest sha256 {digest} (engine {ENGINE_VERSION}: the canonical JSON of "
          "its score tables, floats to 12 places; equal digests, equal tables)")
    return 0


def _live(args: argparse.Namespace) -> int:
    import datetime as dt

    from finbench.live.season import live

    until = None
    if args.until:
        try:
            until = dt.date.fromisoformat(args.until)
        except ValueError:
            raise FinbenchError(f"--until: {args.until!r} is not a date YYYY-MM-DD") from None
    out = live(args.config, args.out, until=until, horizon=args.horizon, echo=print)
    print(f"live directory: {out} (check it with: finbench verify {out})")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from finbench.live.verify import verify_live

    problems, facts = verify_live(args.dir)
    if _failed(problems, f"{args.dir}: verify FAILED with {len(problems)} problem(s)"):
        return 1
    print(f"{args.dir}: verify passed: the ledger's chain; {facts['seals']} seals, each "
          f"token signed under tsa_root.pem; {facts['commits']} commitments ("
          f"{facts['on_time']} sealed on time, {facts['late']} late), {facts['revealed']} "
          f"revealed and opened; {facts['missed']} horizons missed; the season's run replays "
          "every on-time answer, and scored again from run.toml and the store its tables are "
          "the same")
    return 0


def _audit(args: argparse.Namespace) -> int:
    from finbench.audit import audit_run
    from finbench.data.store import sha256_file
    from finbench.runlog.mirror import local_copy
    from finbench.runlog.rundir import read_manifest
    from finbench.runner.manifest import made_by

    with local_copy(args.run) as run_dir:
        problems = audit_run(run_dir, echo=_progress)
        manifest_sha = sha256_file(run_dir / "manifest.json") if not problems else None
        note = made_by(read_manifest(run_dir))
    if note:
        print(f"{args.run}: {note}")
    if _failed(problems, f"{args.run}: audit FAILED with {len(problems)} violation(s)"):
        return 1
    print(f"{args.run}: audit passed (file hashes, config, data snapshot, tasks, labels, every "
          "task x model once, journal, answers re-derived, time gate and receipts, LLM "
          "transcripts, scores and their CSVs, the report when there is one); "
          f"manifest.json sha256 {manifest_sha}")
    return 0


def _merge(args: argparse.Namespace) -> int:
    from finbench.runlog.rundir import load_run_config, receipt
    from finbench.shards import merge_shards
    from finbench.tracks import plugin_of

    out = merge_shards(args.shards, args.out)
    print(f"merged {len(args.shards)} shard(s) into {out}")
    for block in plugin_of(load_run_config(out)).summary(out):
        print(block)
    print(receipt(out))
    return 0


def _report(args: argparse.Namespace) -> int:
    from finbench.reports.build import report
    from finbench.reports.figures import FiguresFailed
    from finbench.runlog.mirror import local_copy

    with local_copy(args.run, write_back=True) as run_dir:
        try:
            tables, figures = report(run_dir)  # (a folder that is no finished run: refused)
        except FiguresFailed as exc:  # the rest is written (and uploaded): say what is not
            for name, why in exc.failures.items():
                print(f"FigureFailed: {name}: {type(why).__name__}: {why}", file=sys.stderr)
            print(f"{args.run}: report written without {len(exc.failures)} figure(s)",
                  file=sys.stderr)
            return 1
        finally:
            _setting_warnings(run_dir)
    print(f"{args.run}: {len(tables)} table files in tables/, {len(figures)} figure files in "
          f"figures/")
    return 0


def _setting_warnings(run_dir: Path) -> None:
    """What the run's report settings warrant saying (a run it could read: none otherwise)."""
    from finbench.runlog.rundir import load_run_config
    from finbench.tracks import plugin_of

    try:
        config = load_run_config(run_dir)
    except (OSError, ValueError):  # no run's manifest, or a broken one: the report said so
        return
    for warning in plugin_of(config).setting_warnings(config):
        print(f"warning: {warning}", file=sys.stderr)


def _tools_serve(args: argparse.Namespace) -> int:
    from finbench.runner.tools_server import serve

    serve(Path(args.run), args.model, args.task, http_port=args.http)
    return 0


def _tools_tasks(args: argparse.Namespace) -> int:
    from finbench.runner.tools_server import waiting_tasks

    for model, tasks in waiting_tasks(Path(args.run), args.model).items():
        for task in tasks:
            print(f"{model}\t{task}")
    return 0


def _export_inspect(args: argparse.Namespace) -> int:
    from finbench.reports.inspect_log import export_inspect

    models = [m.strip() for m in args.models.split(",")] if args.models else None
    for path in export_inspect(Path(args.run), args.out, models=models):
        print(f"wrote {path} (inspect view --log-dir {path.parent})")
    return 0


def _leaderboard(args: argparse.Namespace) -> int:
    from finbench.audit import audit_run
    from finbench.reports.leaderboard import leaderboard

    page = leaderboard(args.runs, args.out, reference=args.reference, echo=_progress,
                       audit=lambda run_dir: audit_run(run_dir, echo=lambda *_: None))
    print(f"wrote {page} (and leaderboard.csv, runs.csv beside it)")
    return 0


def _show(args: argparse.Namespace) -> int:
    from finbench.reports.show import as_json, show
    from finbench.runlog.mirror import local_copy
    from finbench.runlog.rundir import load_run_config
    from finbench.tracks import plugin_of

    with local_copy(args.run) as run_dir:
        found = show(run_dir, args.task_id, args.model)
        track = plugin_of(load_run_config(run_dir))
    print(as_json(found) if args.json else track.show_text(found))
    return 0


def _paper(args: argparse.Namespace) -> int:
    from finbench.reports.build import paper

    figures = paper(args.runs, args.out, allow_different_tasks=args.allow_different_tasks,
                    echo=_progress)
    print(f"wrote {args.out}/tables and {len(figures)} figure files in {args.out}/figures")
    return 0


DESCRIPTION = ("FinBench: does a forecaster state honest uncertainty? Run a config's tasks, "
               "score, audit and report them. Progress and messages go to stderr, results "
               "to stdout; bad input is one line naming what and where (exit 2).")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="finbench", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=describe_version(),
                        help="the package, engine and scoring-rules versions, and exit")
    sub = parser.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="ingest, validate or generate market data").add_subparsers(
        dest="data_command", required=True)
    ingest = data.add_parser("ingest", help="validate a bars/headlines file and add it to a store")
    ingest.add_argument("file", nargs="*", help="bars files (CSV or Parquet; several are "
                        "checked together, and written only if every one is valid)")
    ingest.add_argument("--out", required=True, help="store directory (created if absent)")
    ingest.add_argument("--ticker", help="ticker of a single-ticker file without a ticker column")
    ingest.add_argument("--timezone", help="zone of naive timestamps, e.g. America/New_York")
    ingest.add_argument("--bar-timestamp", choices=("start", "end"), default="start",
                        help="whether a bar's timestamp is its start (default) or its end")
    ingest.add_argument("--bar-seconds", type=int, default=60,
                        help="the bars' length in seconds (default 60; a divisor of a day)")
    ingest.add_argument("--dry-run", action="store_true",
                        help="validate and say what would be written and replaced; write nothing")
    ingest.add_argument("--headlines", action="append", metavar="FILE",
                        help="headlines file (CSV, JSON, JSONL or Parquet); give it again for "
                        "several")
    ingest.set_defaults(func=_data_ingest)
    validate = data.add_parser("validate", help="re-hash and re-check a store")
    validate.add_argument("store", help="a store folder (bars or events), or a URI")
    validate.set_defaults(func=_data_validate)
    for commands in track_commands():  # a track's own arguments and data commands
        commands.add_arguments({"ingest": ingest, "validate": validate}, data)
    copy = data.add_parser("copy", help="copy a store or a run directory between a local "
                           "folder and object storage (s3://bucket/prefix)")
    copy.add_argument("source", help="the store or run directory to copy (a folder or a URI)")
    copy.add_argument("target", help="where to copy it (a folder or a URI)")
    copy.add_argument("--layout", choices=["ticker"], default=None,
                      help="write a read-only copy of a store of bars with a file per ticker "
                      "and quarter, for runs over a few of its tickers (a new local folder)")
    copy.set_defaults(func=_data_copy)
    synth = data.add_parser("synth", help="write the synthetic sample store")
    synth.add_argument("--out", required=True, help="the new store's folder")
    synth.add_argument("--seed", type=seed_argument, default=20250115,
                       help="the generator's seed (default 20250115, the bundled sample's)")
    synth.set_defaults(func=_data_synth)
    fetch = data.add_parser("fetch", help="fetch vendor minute bars into a store (resumable)")
    fetch.add_argument("--source", required=True,
                       help="alpaca, databento, massive or yfinance")
    fetch.add_argument("--tickers", required=True, help="comma-separated symbols")
    fetch.add_argument("--start", required=True, help="first session, YYYY-MM-DD")
    fetch.add_argument("--end", required=True, help="last session, YYYY-MM-DD")
    fetch.add_argument("--out", required=True, help="store directory")
    fetch.add_argument("--feed", help="alpaca feed (iex, sip) or databento dataset")
    fetch.set_defaults(func=_data_fetch)

    tasks = sub.add_parser("tasks", help="expand a config into tasks and labels")
    tasks.add_argument("config", help="a config file (TOML)")
    tasks.add_argument("--out", help="folder for tasks.parquet and labels.parquet")
    tasks.set_defaults(func=_tasks)

    run = sub.add_parser("run", help="forecasts, labels and scores for a config (resumable)")
    run.add_argument("config", help="a config file (TOML)")
    run.add_argument("--out", help="run directory (default results/<config name>); a URI "
                     "(s3://bucket/runs/x) keeps it on object storage")
    run.add_argument("--shard", help="only sessions START:END of the config (merge shards with "
                                     "finbench merge)")
    run.add_argument("--batch", action="store_true",
                     help="send LLM calls through the OpenAI Batch API; run again to collect")
    run.add_argument("--dry-run", action="store_true",
                     help="print LLM calls, estimated tokens and cost; make no request")
    run.add_argument("--executor", choices=["local", "dask"],
                     help="dask: month shards as tasks on a Dask cluster, merged into --out "
                          "(default: the config's [executor] kind, else local)")
    run.add_argument("--scheduler", help="with --executor dask: the scheduler's address "
                                         "(default: the config's, else a LocalCluster of this "
                                         "machine's cores)")
    run.add_argument("--workers", type=int, help="with a LocalCluster: its worker processes")
    run.add_argument("--models", metavar="A,B", help="a trial: only these models of the config "
                     "(comma-separated names), into a folder of its own (default "
                     "results/<config name>-trial)")
    run.add_argument("--limit", type=int, metavar="N", help="a trial: each model asked only the "
                     "run's first N tasks, into a folder of its own")
    run.set_defaults(func=_run)
    liv = sub.add_parser("live", help="forecast in real time at each horizon, sealing every "
                         "answer before its target (docs/live.md)")
    liv.add_argument("config", help="a config file (TOML) with a [live] section")
    liv.add_argument("--out", required=True, help="the live directory (ledger and runs)")
    liv.add_argument("--until", metavar="DATE", help="run every session to this date "
                     "(default: today's, then stop)")
    liv.add_argument("--horizon", metavar="NAME", help="only today's horizon NAME, then exit "
                     "(for a scheduler: cron, a systemd timer)")
    liv.set_defaults(func=_live)
    ver = sub.add_parser("verify", help="check a live directory: ledger, seals, reveals, and "
                         "its season's run")
    ver.add_argument("dir", help="a live directory (finbench live --out)")
    ver.set_defaults(func=_verify)
    score = sub.add_parser("score", help="recompute scores from a run's stored tables")
    score.add_argument("run", help="a run directory (a folder or a URI)")
    score.set_defaults(func=_score)
    audit = sub.add_parser("audit", help="re-derive receipts; non-zero exit on any violation")
    audit.add_argument("run", help="a run directory (a folder or a URI)")
    audit.set_defaults(func=_audit)
    merge = sub.add_parser("merge", help="merge shard runs into one run directory")
    merge.add_argument("shards", nargs="+", help="the shards' run directories")
    merge.add_argument("--out", required=True, help="the merged run's directory")
    merge.set_defaults(func=_merge)
    rep = sub.add_parser("report", help="tables (CSV, Markdown, LaTeX) and figures of a run")
    rep.add_argument("run", help="a run directory (a folder or a URI)")
    rep.set_defaults(func=_report)
    shw = sub.add_parser("show", help="one task of a run: prompt as sent, answer, label, "
                                      "scores, each baseline's forecast")
    shw.add_argument("run", help="a run directory (a folder or a URI)")
    shw.add_argument("task_id", help="the task's id (TICKER|YYYY-MM-DD|HORIZON, or an event "
                     "task's MARKET_ID|t0)")
    shw.add_argument("--model", help="this model (and the baselines) only")
    shw.add_argument("--json", action="store_true", help="as JSON")
    shw.set_defaults(func=_show)
    tools = sub.add_parser("tools", help="an external agent's tasks, served over MCP").add_subparsers(
        dest="tools_command", required=True)
    serve = tools.add_parser("serve", help="serve one waiting task of an agent of kind 'mcp' "
                             "(its prompt, its tools at the task's now, submit_forecast) over "
                             "the Model Context Protocol: stdio, or --http")
    serve.add_argument("run", help="the run directory (local)")
    serve.add_argument("--model", required=True, help="the agent's name in the config")
    serve.add_argument("--task", required=True, help="the task's id (`finbench tools tasks`)")
    serve.add_argument("--http", type=int, metavar="PORT", help="streamable HTTP on "
                       "127.0.0.1:PORT (0: a free port, printed) instead of stdio")
    serve.set_defaults(func=_tools_serve)
    listing = tools.add_parser("tasks", help="the tasks waiting for each agent of kind 'mcp'")
    listing.add_argument("run", help="the run directory (local)")
    listing.add_argument("--model", help="this agent only")
    listing.set_defaults(func=_tools_tasks)
    export = sub.add_parser("export", help="a run in another tool's format").add_subparsers(
        dest="export_command", required=True)
    inspect_log = export.add_parser("inspect", help="an Inspect .eval log per language model "
                                    "of the run (every sample: messages, answer, label, scores)")
    inspect_log.add_argument("run", help="the run directory (local)")
    inspect_log.add_argument("--out", help="the folder for the logs (default RUN/inspect)")
    inspect_log.add_argument("--models", metavar="A,B", help="these models only")
    inspect_log.set_defaults(func=_export_inspect)
    board = sub.add_parser("leaderboard", help="one page (and CSV) from many runs: the runs "
                           "whose audit passes, models compared on the tasks they share")
    board.add_argument("runs", nargs="+", help="the run directories")
    board.add_argument("--out", required=True, help="the folder for leaderboard.html")
    board.add_argument("--reference", default=None, help="the model each skill is against "
                       "(default each track's own: the intraday track's coin, the event "
                       "track's first reference)")
    board.set_defaults(func=_leaderboard)
    pap = sub.add_parser("paper", help="regenerate paper/tables and paper/figures from runs")
    pap.add_argument("runs", nargs="+", help="the run directories to pool")
    pap.add_argument("--out", default="paper", help="where tables/ and figures/ go (default "
                     "paper)")
    pap.add_argument("--allow-different-tasks", action="store_true",
                     help="pool runs whose task sets differ (the overlap is printed)")
    pap.set_defaults(func=_paper)
    return parser


def _print_notes(exc: BaseException) -> None:
    """What else went wrong while the command stopped (notes added to its error, e.g. a last
    upload to object storage that failed too), a line each after the error's."""
    for note in getattr(exc, "__notes__", ()):
        print(f"  {note}", file=sys.stderr)


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has closed it (poll says POLLERR of its write
    end); False where stdout is no file (a test's capture) or cannot be polled."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # nothing imported yet that allocates through pyarrow
    # for the whole command (finbench.core.memory); a run keeps pyarrow's pages too
    keep_freed_memory(arrow_pages=args.func is _run)
    one_blas_thread()  # small products, not spread over the cores (finbench.core.blas)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # (here, where a reader gone is seen, not at the interpreter's exit)
        return code
    except BrokenPipeError:
        if not _stdout_closed():  # another pipe (a helper process's): an error of its own
            raise
        # the reader of stdout stopped reading (`finbench show RUN ID | head`): end as a
        # command killed by SIGPIPE does, without a traceback; what it wrote to files is kept
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except FinbenchError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        _print_notes(exc)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C: said in a line, not as a traceback
        verb = " ".join(filter(None, (args.command, getattr(args, "data_command", None))))
        print(f"finbench {verb}: interrupted; what it finished is kept (`finbench run` and "
              "`finbench data fetch`, given again, go on from there)", file=sys.stderr)
        _print_notes(exc)
        return 130
    except OSError as exc:
        from finbench.core.outputs import out_of_space

        if not out_of_space(exc):
            raise
        print(f"DiskFullError: a write failed for lack of space ({exc}); free some space and "
              "give the same command again", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
