"""A run split into shards that run as tasks on a Dask distributed cluster, then merged.

``run_on_dask(CONFIG, OUT)`` cuts the config's sessions into one shard per calendar month,
or per ``[executor] months`` months (:func:`shard_ranges`), runs each as ``finbench run
CONFIG --shard A:B`` into ``OUT/shards/A_B`` on a worker, leaving its scores to the merge,
and merges them into ``OUT`` (:mod:`finbench.shards`), which scores every row: the merged
run equals the single-process run (scores byte-identical). Without a scheduler address
a ``LocalCluster`` of this machine's cores is started. A shard whose worker dies is retried by
the scheduler on another (or a restarted) worker; its journal resumes where the dead one
stopped, so no answer is made twice. Giving the same command again resumes every shard.

Rate limits of LLM models are one budget per model across the cluster: each shard's run
spaces its requests and tokens to ``1/k`` of the configured ``requests_per_minute`` and
``tokens_per_minute``, ``k`` being how many shards can run at once: the workers' threads (a
thread runs one shard), at most the shards, counted when the shards are sent; a scheduler with
no worker yet gets ``k`` = the shards, as any number may join (:func:`rate_split`). Workers
may join a scheduler's cluster later (machines started after the run, an adaptive cluster), so
there a run with rate limits holds its shards to ``k`` at once, whatever joins: each shard
takes one of ``k`` leases of a Dask ``Semaphore`` before it starts (:func:`shard_slots`). A
lease whose worker died is given back when it times out (Dask's
``distributed.scheduler.locks.lease-timeout``, 30 s by default). A LocalCluster is the run's
own and never grows, so it needs none.

Workers run FinBench from their own installation. The config's text travels with each task,
so workers need not see the client's disk. The store and ``OUT`` may be folders on object
storage (``s3://bucket/store``, ``s3://bucket/runs/x``; credentials from each process's
environment, :mod:`finbench.core.location`): then no worker needs a shared disk. A shard runs
in a scratch folder of its worker, mirrored to ``OUT/shards/A_B`` as it goes
(:mod:`finbench.runlog.mirror`), so a retried shard resumes from what its dead worker had
sent; the merge copies the shards down to the client, merges and scores them there, and
uploads the merged run to ``OUT``. With a local store path, every worker must see it at that
path; a local ``OUT`` is given to the workers by its absolute path and must be a folder they
share with this machine (a finished shard whose folder is not here is named before the merge).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import signal
import threading
import time
from pathlib import Path

import pandas as pd

from finbench.core.calendar import get_calendar
from finbench.core.config import ConfigText, ExecutorConfig, executor_problem
from finbench.core.errors import ConfigError, FinbenchError, RunError
from finbench.core.fork_server import serve_from_here
from finbench.core.location import copy_tree, is_uri, join
from finbench.core.memory import keep_freed_memory
from finbench.core.progress import Countdown
from finbench.core.version import code_version
from finbench.runlog.mirror import copied, scratch_folder
from finbench.runlog.rundir import MANIFEST, receipt
from finbench.runner import run
from finbench.runner.manifest import describe_code, same_finbench
from finbench.shards import merge_shards
from finbench.tracks import plugin_of
from finbench.tracks.configs import load_config_file, sessions_only

SHARDS = "shards"


def chosen_executor(config, *, kind: str | None = None, scheduler: str | None = None,
                    workers: int | None = None) -> ExecutorConfig:
    """How ``finbench run`` runs ``config``: its ``[executor]`` section, with the command
    line's ``--executor`` (another kind than the section's replaces the section whole),
    ``--scheduler`` and ``--workers`` over it. A ConfigError names what conflicts."""
    section = config.executor or ExecutorConfig()  # (a track that runs whole has none)
    if kind is not None and kind != section.kind:
        section = ExecutorConfig(kind=kind)
    settings = {"kind": section.kind,
                "scheduler": section.scheduler if scheduler is None else scheduler,
                "workers": section.workers if workers is None else workers,
                "months": section.months}
    problem = executor_problem(**settings)
    if problem:
        given = [flag for flag, value in (("--executor", kind), ("--scheduler", scheduler),
                                          ("--workers", workers)) if value is not None]
        raise ConfigError(f"{' and '.join(given) or 'the config'} with the config's [executor] "
                          f"(kind = {section.kind!r}): {problem}")
    return ExecutorConfig(**settings)


def shard_ranges(config, months: int | None = None) -> list[tuple[dt.date, dt.date]]:
    """The first and last session of each ``months`` consecutive calendar months of the
    config's range that have one (a month without a session is not counted); ``months``
    by default the config's ``[executor] months``, else one."""
    if months is None:
        months = config.executor.months if config.executor else 1
    spec = config.tasks
    cal = get_calendar(spec.calendar, pd.Timestamp(spec.start), pd.Timestamp(spec.end))
    sessions = cal.sessions_in_range(pd.Timestamp(spec.start), pd.Timestamp(spec.end))
    if len(sessions) == 0:
        raise RunError(f"{spec.start}..{spec.end}: no session of {spec.calendar} to run")
    groups = [g for _, g in pd.Series(sessions, index=sessions).groupby(
        sessions.to_period("M"))]
    blocks = [groups[k:k + months] for k in range(0, len(groups), months)]
    return [(block[0].iloc[0].date(), block[-1].iloc[-1].date()) for block in blocks]


def run_shard(config: ConfigText, out: str, start: str, end: str, rate_share: float,
              slots=None) -> str | FinbenchError:
    """One shard's run (what a worker executes); returns its directory, or the FinbenchError
    that stopped it: bad input (a damaged local partition, a refused config) fails the same
    way on every attempt, so it is handed back to be raised by the caller, not retried by
    Dask, whose retries are for what may pass the next time (an error that says so, like a
    read from object storage, is raised). ``slots``: the run's :func:`shard_slots`, one of
    whose leases the shard holds while it runs (None: it runs at once)."""
    try:
        with slots if slots is not None else contextlib.nullcontext():
            return str(run(config, out, shard=(start, end), rate_share=rate_share,
                           echo=lambda *_: None, score=False))  # the merge scores
    except FinbenchError as exc:
        if getattr(exc, "may_pass_again", False):
            raise
        exc.add_note(f"in shard {start}..{end}{_on_worker()}")
        return exc


def _on_worker() -> str:
    """``, on worker ADDRESS`` inside a Dask worker (its paths are that machine's), else
    nothing."""
    try:
        from distributed import get_worker

        return f", on worker {get_worker().address}"
    except (ImportError, ValueError):  # not in a worker
        return ""


def shardable(config) -> None:
    """A ConfigError unless ``config`` may run as month shards on Dask: a track split by
    session, and no agent answering over MCP (its sessions would wait in each shard's folder,
    to be served one by one)."""
    sessions_only(config, "--executor dask")
    external = [m.name for m in config.models if m.kind == "mcp"]
    if external:
        raise ConfigError(f"--executor dask: {', '.join(external)} answer over MCP, each "
                          "task's session in the run's own folder: run the config with "
                          "--executor local (or as --shard runs, each served, then `finbench "
                          "merge`)")


def run_on_dask(config_path: str | Path, out: str | Path, *, scheduler: str | None = None,
                workers: int | None = None, months: int | None = None, echo=print,
                results=None) -> Path | str:
    """Run ``config_path`` into ``out`` as shards of ``months`` calendar months (default: the
    config's ``[executor] months``, else one) on a Dask cluster (``scheduler``: its address;
    none: a LocalCluster of ``workers`` processes, by default one per core), then merge them
    into ``out``. Returns ``out``. ``echo`` takes what it says as it goes, ``results`` the
    merged run's tables and receipt (by default ``echo`` too)."""
    results = results or echo
    from distributed import Client, LocalCluster, as_completed

    text = ConfigText.read(config_path)
    config = load_config_file(text)[0]
    shardable(config)
    ranges = shard_ranges(config, months)
    remote = is_uri(out)
    if remote and not isinstance(config.data.store, str):
        echo(f"note: the store is the local folder {config.data.store}; workers on other "
             "machines need it at that path (or give an object-storage store)")
    if not remote:
        out = Path(out)
    # the cluster's start and close included
    with _deferred_interrupt() as interrupt, _forked_workers(local=not scheduler):
        cluster = None if scheduler else _local_cluster(
            LocalCluster, _local_size(workers, len(ranges), echo, months))
        try:
            interrupt.check()  # pressed while the cluster started: no shard is sent
            with _client(Client, scheduler, cluster) as client:
                if cluster is not None:  # this run's own workers only
                    client.register_plugin(_quiet_heartbeats())
                    client.register_plugin(_kept_memory())
                else:  # a cluster's workers run their own installation: this one's, or none
                    same_code_on(client.run(_code_version), scheduler)
                if not remote:  # once connected: a scheduler that cannot be reached leaves none
                    (out / SHARDS).mkdir(parents=True, exist_ok=True)
                ways, said = rate_split(client.scheduler_info()["workers"], len(ranges))
                share = 1.0 / ways
                # a scheduler's cluster may grow: then no more than `ways` shards at once
                slots = (shard_slots(ways) if scheduler and ways < len(ranges)
                         and rate_limited(config) else None)
                echo(f"{len(ranges)} shards on {said} ({scheduler or 'a LocalCluster'}); LLM "
                     f"rate limits split {ways} way{'s' if ways > 1 else ''}" + (
                         f": at most {ways} shard{'s' if ways > 1 else ''} at once, however "
                         "many workers join" if slots is not None else ""))
                # a worker's working folder is its own (on another machine, or started
                # elsewhere): it is given this process's folder by its absolute path
                dirs = {a: join(str(out), f"{SHARDS}/{a}_{b}") if remote
                        else out.absolute() / SHARDS / f"{a}_{b}" for a, b in ranges}
                futures = [client.submit(run_shard, text,
                                         str(dirs[a]), str(a), str(b), share, slots,
                                         pure=False, retries=2, key=f"finbench-shard-{a}_{b}")
                           for a, b in ranges]
                folders = {f.key: dirs[a] for f, (a, _) in zip(futures, ranges, strict=True)}
                completed = as_completed(futures)
                progress = Countdown("shards", len(ranges), echo, every=0.0)
                while not completed.is_empty():
                    interrupt.check()
                    for future in completed.next_batch(block=False):
                        done = _shard_result(future, folders, scheduler)
                        if isinstance(done, FinbenchError):
                            raise done
                        progress.add()  # shards: k/N, elapsed, ETA
                    time.sleep(WAIT)
                if slots is not None:  # every shard gave its lease back
                    slots.close()
        finally:
            if cluster is not None:
                cluster.close()
        interrupt.check()  # pressed while the last shard finished or the cluster closed
    shards = [dirs[a] for a, _ in ranges]
    if not remote:
        shards_here(shards, scheduler)
    merged = merge_remote(shards, str(out)) if remote else merge_shards(shards, out)
    echo(f"merged {len(ranges)} shards into {merged}")
    for block in plugin_of(config).summary(merged):
        results(block)
    results(receipt(merged))
    return merged


def _shard_result(future, folders: dict, scheduler: str | None):
    """A finished shard's result (its folder, or the FinBench error it handed back). A shard
    Dask gave up on because its workers died is a RunError naming its folder (``folders``:
    by task key); one cancelled (the scheduler lost, or the task cancelled there), one
    naming the scheduler."""
    from concurrent.futures import CancelledError

    from distributed import KilledWorker

    try:
        return future.result()
    except CancelledError:
        raise RunError(f"{scheduler or 'the LocalCluster'}: shard "
                       f"{Path(str(folders[future.key])).name} was cancelled: the scheduler was "
                       "lost while the shards ran, or the task was cancelled there; what the "
                       "shards made is kept: give the same command again, with a scheduler "
                       "that answers, to go on from there") from None
    except KilledWorker:
        raise RunError(f"{folders[future.key]}: the shard's worker died (out of memory, or killed) as "
                       "often as the cluster allows (distributed.scheduler.allowed-failures); "
                       "what the shards made is kept: give the same command again to go on "
                       "from there, with more memory per worker if they ran out (a "
                       "LocalCluster: fewer --workers)") from None


def _code_version() -> dict:
    """The FinBench a worker runs (:func:`~finbench.runner.manifest.code_version`, looked up
    on the worker)."""
    from finbench.runner import manifest

    return manifest.code_version()


def same_code_on(workers: dict[str, dict], scheduler: str | None) -> None:
    """A RunError, before any shard is sent, unless every worker (address -> the FinBench it
    runs) runs this process's FinBench: the merge refuses shards made by another, after they
    have all run."""
    ours = code_version()
    for address, theirs in sorted(workers.items()):
        if not same_finbench(theirs, ours):
            raise RunError(f"{scheduler}: worker {address} runs {describe_code(theirs)}, this "
                           f"process {describe_code(ours)}: a run's shards and its merge come "
                           "from one FinBench; install this one on the workers (or run this "
                           "command with theirs)")


def shards_here(shards: list[Path], scheduler: str | None) -> None:
    """A RunError unless every shard a worker reported finished is a run folder on this
    machine: a worker writes a local ``--out`` on its own disk, which on another machine is
    not this one's."""
    for shard in shards:
        if not (shard / MANIFEST).is_file():
            raise RunError(f"{shard}: the shard finished on a worker of "
                           f"{scheduler or 'the cluster'}, but its folder is not on this "
                           "machine: workers write a local --out on their own disks; give "
                           "--out a folder this machine and every worker share, or one on "
                           "object storage (s3://bucket/...)")


def rate_limited(config) -> bool:
    """Whether a language model of ``config`` (its stance judge among them) has a
    ``requests_per_minute`` or ``tokens_per_minute``: a budget the shards share."""
    stance = plugin_of(config).stance_judge(config)
    judge = [stance.judge] if stance is not None and stance.judge is not None else []
    return any(getattr(m, "requests_per_minute", None) or getattr(m, "tokens_per_minute", None)
               for m in [*config.models, *judge])


def shard_slots(ways: int):
    """A Dask ``Semaphore`` of ``ways`` leases, named for this run alone, on the scheduler of
    the client in use: a shard holds one while it runs (:func:`run_shard`)."""
    import uuid

    from distributed import Semaphore

    return Semaphore(max_leases=ways, name=f"finbench-shards-{uuid.uuid4().hex}")


def rate_split(workers: dict, shards: int) -> tuple[int, str]:
    """How many ways each LLM model's rate limits are split (how many shards can run at once),
    and the cluster as the run describes it, from the scheduler's workers (Dask's
    ``scheduler_info()["workers"]``: address -> facts, ``nthreads`` among them). Each of a
    worker's threads runs a shard, so the threads count, at most the shards; with no worker
    yet, any number may join before the shards finish, so the split is the shards'."""
    if not workers:
        return shards, "no workers yet (the shards wait for some to join)"
    threads = sum(int(w.get("nthreads", 1)) for w in workers.values())
    said = f"{len(workers)} worker{'s' if len(workers) > 1 else ''}" + (
        f", {threads} threads" if threads != len(workers) else "")
    return max(1, min(threads, shards)), said


def _local_size(workers: int | None, shards: int, echo, months: int = 1) -> int:
    """How many processes the LocalCluster starts: ``workers`` (by default one per core), but
    never more than there are shards, as a worker beyond them would get no task (``--workers
    100000`` would otherwise try to start that many processes); said when it is fewer than
    asked."""
    asked = workers or os.cpu_count() or 1
    if workers is not None and workers > shards:
        per = "month" if months == 1 else f"{months} months"
        echo(f"note: {workers} workers asked, but the run has {shards} shards (one per {per}); "
             f"the LocalCluster starts {shards}")
    return max(1, min(asked, shards))


class _ClosingHeartbeats(logging.Filter):
    """Drops a worker's "Failed to communicate with scheduler during heartbeat" record. On a
    LocalCluster the run started itself, the scheduler closing (the run done, or interrupted
    by Ctrl-C) races the workers' heartbeats, and the traceback logged then says nothing a
    user can act on; a worker that truly lost its scheduler fails its shard, which the client
    reports."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(
            "Failed to communicate with scheduler during heartbeat")


def _quiet_heartbeats():
    """A worker plugin putting :class:`_ClosingHeartbeats` on each worker's log (workers the
    nanny restarts included)."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class QuietHeartbeats(WorkerPlugin):
        name = "finbench-quiet-heartbeats"

        def setup(self, worker) -> None:
            logging.getLogger("distributed.worker").addFilter(_ClosingHeartbeats())

    return QuietHeartbeats()


def _kept_memory():
    """A worker plugin keeping freed memory in each worker's heap for reuse, as ``finbench``
    commands keep it in theirs (:func:`~finbench.core.memory.keep_freed_memory`; pyarrow's
    pages are kept through the environment the workers inherit): a shard frees and allocates
    arrays of megabytes over and over, as a run does."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class KeptMemory(WorkerPlugin):
        name = "finbench-kept-memory"

        def setup(self, worker) -> None:
            keep_freed_memory()

    return KeptMemory()


def _local_cluster(cluster_class, workers: int):
    """A LocalCluster of ``workers`` processes that never answer SIGINT:
    Ctrl-C in a terminal reaches every process of its group, and the client alone answers it
    (closing the cluster), so the workers print no traceback of their own. The signal is held
    back while the cluster starts (:func:`_sigint_held`): the processes started then (and
    those its threads start later, a worker replacing one that died) keep it held back for
    good, and a Ctrl-C pressed meanwhile is kept for the run, not lost. Its scheduler's HTTP
    server listens on a loopback port the system picks: without an address it takes 8787, and
    a second run on the machine at the same time warns that it is taken. Dask's diagnostics
    for a dashboard no one is shown are sampled seldom (:data:`QUIET`)."""
    import dask

    with _sigint_held(), dask.config.set(QUIET):  # (a nanny hands its worker the config)
        return cluster_class(n_workers=workers, threads_per_worker=1,
                             processes=True, dashboard_address="127.0.0.1:0",
                             silence_logs=logging.ERROR)


# Dask's own diagnostics on the run's LocalCluster, which serves no dashboard anyone is shown:
# each worker's statistical profiler (a look at every thread's stack every 10 ms, by
# default), every server's event-loop check (every 20 ms) and the scheduler's system monitor
# (every 500 ms) cost 0.14 s of CPU a second on an idle cluster of two workers, more on a busy
# one; the run's shards, scores and progress are the same without them
QUIET = {"distributed.worker.profile.enabled": False,
         "distributed.admin.tick.interval": "1s",
         "distributed.admin.system-monitor.interval": "5s"}

# what a LocalCluster's worker runs, imported once by the process the workers are forked from
WORKER_PRELOAD = ["distributed", "finbench.cluster"]


@contextlib.contextmanager
def _forked_workers(local: bool = True):
    """Inside the block, the run's own LocalCluster (``local``) starts its workers by forking
    them from a multiprocessing *forkserver* that has imported :data:`WORKER_PRELOAD` once
    (Dask's ``distributed.worker.multiprocessing-method``), where the platform has one (not
    Windows); Dask's default, ``spawn``, starts a new Python per worker, each importing
    Dask and FinBench again: on 2 cores, about 1.3 s of CPU of a year's run. Where it is safe
    (:func:`~finbench.core.fork_server.serve_from_here`: Linux, no other thread running), the
    forkserver is a fork of this process, which has imported them already; elsewhere it is
    a new Python that imports them.

    The block starts the forkserver and stops it on leaving, so no process outlives the run
    and every worker's CPU is counted in this process's children (the forkserver reaps its
    workers; this process, the forkserver). The workers' environment is this process's with
    Dask's ``pre-spawn-environ`` over it (each worker sets it), and SIGINT is blocked in them
    (:func:`_sigint_held`), as with ``spawn``. Where a forkserver of the caller's already
    runs (its environment and mask its own), or this Python's cannot be stopped, the workers
    are spawned."""
    import multiprocessing

    if not local or "forkserver" not in multiprocessing.get_all_start_methods():
        yield
        return
    from multiprocessing import forkserver

    import dask

    server = getattr(forkserver, "_forkserver", None)
    if getattr(server, "_forkserver_pid", 0) is not None or not hasattr(server, "_stop"):
        yield
        return
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        from distributed.utils import get_mp_context

        get_mp_context().set_forkserver_preload(WORKER_PRELOAD)  # after Dask's own (once)
        serve_from_here(server, WORKER_PRELOAD)
        try:
            yield
        finally:
            server._stop()


@contextlib.contextmanager
def _sigint_held():
    """SIGINT blocked in this thread inside the block, and so in the threads it starts and
    the processes they start (a signal mask is inherited through fork and exec, and Python
    leaves it as it finds it); unblocked after. A SIGINT that comes meanwhile is not lost: it
    reaches the handler in place through a thread that does not block it (one started before),
    or when the block ends. Where the system has no signal masks (Windows), SIGINT is ignored
    inside the block instead (from the main thread alone), and one that comes then is lost."""
    if not hasattr(signal, "pthread_sigmask"):
        with _sigint(signal.SIG_IGN):
            yield
        return
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()  # its first start unblocks SIGINT in the caller's thread
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@contextlib.contextmanager
def _sigint(handler):
    """SIGINT handled by ``handler`` inside the block, the handler before it restored after.
    Only the main thread may set handlers, and one not set from Python (None) is left alone:
    there the signal stays as it is."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    if previous is not None:
        signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


WAIT = 0.1  # seconds between looks at the shards and at Ctrl-C


class _Interrupt:
    """Ctrl-C while the client talks to the cluster, kept for :meth:`check`."""

    def __init__(self) -> None:
        self.pressed = threading.Event()

    def press(self, signum, frame) -> None:
        if self.pressed.is_set():  # pressed again: at once, wherever the client is
            raise KeyboardInterrupt
        self.pressed.set()

    def check(self) -> None:
        if self.pressed.is_set():
            raise KeyboardInterrupt


@contextlib.contextmanager
def _deferred_interrupt():
    """Ctrl-C (SIGINT) raised at :meth:`_Interrupt.check`, between the client's calls, not
    inside one: a KeyboardInterrupt in Dask's ``sync`` at the wrong moment leaves its event
    loop waiting on a callback that failed ("cannot access free variable 'future'"), and the
    command never ends. A second Ctrl-C interrupts at once. Off the main thread (where no
    handler can be set) the signal is left as it is."""
    interrupt = _Interrupt()
    with _sigint(interrupt.press):
        yield interrupt


def _client(client_class, scheduler: str | None, cluster):
    """A client of the LocalCluster ``cluster``, or of the scheduler at ``scheduler``: one
    that cannot be reached, or an address Dask cannot read, is a RunError naming it."""
    if cluster is not None:
        return client_class(cluster)
    try:
        return client_class(scheduler)
    except (OSError, ValueError) as exc:
        raise RunError(f"Dask scheduler {scheduler!r} (--scheduler, or scheduler in the "
                       f"config's [executor]): cannot connect ({exc}); start one (`dask "
                       "scheduler`, then `dask worker ADDRESS` on each machine) or give no "
                       "scheduler to start a LocalCluster of this machine's cores") from None


def merge_remote(shards: list[str], out: str) -> str:
    """Merge shard runs on object storage into ``out`` there: copied down to a scratch
    folder, merged and scored in it, and the merged run uploaded (its lock and temporary
    files left out). ``merged_from`` names the shards' URIs."""
    with scratch_folder("merge") as tmp:
        local = [Path(tmp) / SHARDS / Path(s).name for s in shards]
        for uri, folder in zip(shards, local, strict=True):
            copy_tree(uri, folder)
        merged = merge_shards(local, Path(tmp) / "merged", merged_from=shards)
        copy_tree(merged, out, skip=lambda rel: not copied(rel))
    return out
