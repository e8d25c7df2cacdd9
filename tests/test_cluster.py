"""Shards on a Dask LocalCluster (two worker processes), merged: the same run as one process,
byte for byte where the single-process promise holds; a worker killed mid-shard is replaced
and its shard resumes from its journal."""

import datetime as dt
import hashlib
import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from finbench.audit import audit_run
from finbench.cluster import run_on_dask, shard_ranges
from finbench.runner import run
from finbench.tracks.configs import load_config
from tests.helpers import damaged_store, llm_toml, month_shards_config

pytest.importorskip("distributed")


def baseline_config(tmp_path, sample_store, extra=""):
    return month_shards_config(tmp_path / "cfg.toml", sample_store, extra)


def test_months_with_sessions_make_the_shards(tmp_path, sample_store):
    config = load_config(baseline_config(tmp_path, sample_store))
    assert shard_ranges(config) == [(dt.date(2024, 11, 25), dt.date(2024, 11, 29)),
                                    (dt.date(2024, 12, 2), dt.date(2024, 12, 31)),
                                    (dt.date(2025, 1, 2), dt.date(2025, 1, 8))]
    # [executor] months = 2: two months a shard, the last holding what is left
    assert shard_ranges(config, 2) == [(dt.date(2024, 11, 25), dt.date(2024, 12, 31)),
                                       (dt.date(2025, 1, 2), dt.date(2025, 1, 8))]
    assert shard_ranges(config, 12) == [(dt.date(2024, 11, 25), dt.date(2025, 1, 8))]


@pytest.mark.slow
def test_shards_on_a_local_cluster_equal_the_single_process_run(tmp_path, sample_store,
                                                              monkeypatch):
    cfg = baseline_config(tmp_path, sample_store)
    said = []
    from distributed import Client

    registered, real = [], Client.register_plugin

    def register(self, plugin, *args, **kwargs):
        registered.append(plugin.name)
        return real(self, plugin, *args, **kwargs)

    monkeypatch.setattr(Client, "register_plugin", register)
    merged = run_on_dask(cfg, tmp_path / "dask", workers=2, echo=said.append)
    # the run's own workers: quiet heartbeats, freed memory kept (as a command keeps it)
    assert registered == ["finbench-quiet-heartbeats", "finbench-kept-memory"]
    alone = []
    single = run(cfg, tmp_path / "single", echo=alone.append)
    assert said[0].startswith("3 shards on 2 workers (a LocalCluster)")
    # each shard as it finishes: how many of them, the time so far and an ETA
    assert [re.fullmatch(r"shards: (\d)/3, \d+\.\ds elapsed, ETA \d+\.\ds", line).group(1)
            for line in said[1:4]] == ["1", "2", "3"]
    assert said[-3].startswith("merged 3 shards into ")
    # the tables the run in one process prints, the same
    assert said[-2].startswith("By horizon:") and said[-2] in alone
    digest = hashlib.sha256((merged / "manifest.json").read_bytes()).hexdigest()
    assert said[-1] == (f"receipt: manifest.json sha256 {digest} (keep it: `finbench audit` "
                        "checks every file against the hashes this manifest records)")
    for name in ("scores.csv", "scores.parquet", "labels.parquet", "tasks.parquet",
                 "rows.parquet"):
        assert (merged / name).read_bytes() == (single / name).read_bytes(), name
    a, b = (pd.read_parquet(d / "forecasts.parquet").drop(columns="latency")
            for d in (merged, single))
    pd.testing.assert_frame_equal(a, b)
    assert audit_run(merged) == []


def test_a_local_cluster_never_starts_more_workers_than_there_are_shards():
    """A worker beyond the shards would get no task (``--workers 100000`` would try to start
    that many processes): the LocalCluster starts one per shard and says so; asked for fewer,
    or for none (one per core), it starts those, silently."""
    from finbench.cluster import _local_size

    said = []
    assert _local_size(64, 3, said.append) == 3
    assert said == ["note: 64 workers asked, but the run has 3 shards (one per month); the "
                    "LocalCluster starts 3"]
    said.clear()
    assert _local_size(2, 3, said.append) == 2 and _local_size(3, 3, said.append) == 3
    assert _local_size(None, 1, said.append) == 1
    assert _local_size(None, 10_000, said.append) == (os.cpu_count() or 1)
    assert said == []


def test_a_shard_finished_on_another_machines_disk_is_named_with_what_to_do(tmp_path):
    """Workers on other machines write a local --out on their own disks: a shard they
    finished that is not here is named, with the two ways out, before any merge."""
    from finbench.cluster import shards_here
    from finbench.core.errors import RunError

    here, there = tmp_path / "shards" / "a", tmp_path / "shards" / "b"
    here.mkdir(parents=True)
    (here / "manifest.json").write_text("{}")
    shards_here([here], "tcp://10.0.0.5:8786")
    with pytest.raises(RunError) as caught:
        shards_here([here, there], "tcp://10.0.0.5:8786")
    assert str(caught.value) == (
        f"{there}: the shard finished on a worker of tcp://10.0.0.5:8786, but its folder is "
        "not on this machine: workers write a local --out on their own disks; give --out a "
        "folder this machine and every worker share, or one on object storage "
        "(s3://bucket/...)")


def test_rate_limits_are_split_among_the_shards_that_can_run_at_once():
    """Each worker thread runs a shard; a scheduler without workers may get any number, so
    each shard then keeps to its share of all the shards."""
    from finbench.cluster import rate_split

    one = {"nthreads": 1}
    assert rate_split({"a": one, "b": one}, 3) == (2, "2 workers")
    assert rate_split({"a": {"nthreads": 4}, "b": {"nthreads": 4}}, 3) == (
        3, "2 workers, 8 threads")
    assert rate_split({"a": {"nthreads": 2}}, 12) == (2, "1 worker, 2 threads")
    assert rate_split({"a": one}, 12) == (1, "1 worker")
    assert rate_split({}, 12) == (12, "no workers yet (the shards wait for some to join)")


def test_a_budget_the_shards_share_is_a_models_or_its_judges_rate_limit(tmp_path,
                                                                         sample_store):
    from finbench.cluster import rate_limited

    judge = ('[analysis.stance]\nmethod = "judge"\n[analysis.stance.judge]\nname = "j"\n'
             'kind = "openai"\nmodel = "x"\nbase_url = "http://127.0.0.1:9/v1"\n'
             'api_key_env = "K"\n')
    cases = {"": False, llm_toml("http://127.0.0.1:9/v1", "concurrency = 4\n"): False,
             llm_toml("http://127.0.0.1:9/v1", "requests_per_minute = 60\n"): True,
             llm_toml("http://127.0.0.1:9/v1", "tokens_per_minute = 9000\n"): True,
             judge: False, judge + "tokens_per_minute = 9000\n": True}
    for extra, limited in cases.items():
        assert rate_limited(load_config(baseline_config(tmp_path, sample_store, extra))) is limited


@pytest.mark.slow
def test_a_run_given_a_schedulers_address_uses_its_workers_and_leaves_them_running(
        tmp_path, sample_store, capfd, monkeypatch):
    """``--scheduler ADDRESS``, as on a cluster of several machines: the shards run on that
    scheduler's workers (two worker processes of two threads each, started here before the
    run, as a cluster's are: shards run side by side in one process) and merge into the
    single-process run; the cluster is someone else's, so it keeps
    its workers afterwards, and the same command again finds every shard done. A partition
    that cannot be read stops a run there with its error: the shard hands the error back, so
    no task fails on a worker (a failing task would be retried, each attempt logged as
    "Compute Failed" on the workers' stderr, which is this process's)."""
    import logging

    from distributed import Client, LocalCluster

    from finbench.core.errors import StoreError
    from tests.helpers import cli

    cfg = baseline_config(tmp_path, sample_store)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the workers' working folder: not this test's
    with LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                      dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR) as cluster:
        address = cluster.scheduler_address
        command = ["run", cfg, "--out", tmp_path / "dask", "--executor", "dask",
                   "--scheduler", address]
        done = cli(*command)
        assert done.returncode == 0, done.stderr
        # a thread runs a shard: two workers of two threads run all three at once
        assert (f"3 shards on 2 workers, 4 threads ({address}); LLM rate limits split 3 ways"
                in done.stderr)  # a message: on stderr
        single = run(cfg, tmp_path / "single", echo=lambda *_: None)
        for name in ("scores.csv", "labels.parquet", "rows.parquet"):
            assert (tmp_path / "dask" / name).read_bytes() == (single / name).read_bytes(), name
        with Client(cluster) as client:
            assert len(client.scheduler_info()["workers"]) == 2  # still running
            assert "finbench-quiet-heartbeats" not in client.run_on_scheduler(
                lambda dask_scheduler: list(dask_scheduler.plugins) + list(
                    dask_scheduler.worker_plugins))
        before = (tmp_path / "dask" / "forecasts.parquet").read_bytes()
        again = cli(*command)
        assert again.returncode == 0, again.stderr
        assert (tmp_path / "dask" / "forecasts.parquet").read_bytes() == before
        store, rel = damaged_store(tmp_path)
        damaged = month_shards_config(tmp_path / "damaged.toml", store)
        # a relative --out is this process's folder: the workers, started in another one
        # (as on another machine), are given its absolute path
        monkeypatch.chdir(tmp_path)
        relative = cli("run", cfg, "--out", "rel", "--executor", "dask", "--scheduler", address)
        assert relative.returncode == 0, relative.stderr
        assert (tmp_path / "rel" / "scores.csv").read_bytes() == (single / "scores.csv").read_bytes()
        assert not (elsewhere / "rel").exists()
        capfd.readouterr()
        with pytest.raises(StoreError, match="cannot be read") as caught:
            run_on_dask(damaged, tmp_path / "broken", scheduler=address, echo=lambda *_: None)
        # where it failed (a later shard's history reads that partition too): a worker's paths
        assert re.fullmatch(r"in shard 20\d\d-\d\d-\d\d\.\.20\d\d-\d\d-\d\d, on worker "
                            r"tcp://127\.0\.0\.1:\d+", caught.value.__notes__[0])
        assert "Compute Failed" not in capfd.readouterr().err
        # workers running another FinBench than this process: refused before a shard is sent
        import finbench.cluster
        from finbench.core.errors import RunError

        ours = finbench.cluster.code_version()
        monkeypatch.setattr(finbench.cluster, "code_version",
                            lambda: {**ours, "package_version": "9.9.9"})
        with pytest.raises(RunError) as caught:
            run_on_dask(cfg, tmp_path / "other", scheduler=address, echo=lambda *_: None)
        assert str(caught.value).startswith(f"{address}: worker tcp://127.0.0.1:")
        assert str(caught.value).endswith(
            f" runs FinBench {ours['package_version']} (git {str(ours['git_revision'])[:12]}), "
            f"this process FinBench 9.9.9 (git {str(ours['git_revision'])[:12]}): a run's "
            "shards and its merge come from one FinBench; install this one on the workers (or "
            "run this command with theirs)")
        assert not (tmp_path / "other").exists()


@pytest.mark.slow
def test_workers_joining_a_schedulers_cluster_run_no_more_shards_at_once_than_the_split(
        tmp_path, sample_store, server, llm_env):
    """The rate limits are split among the shards that can run when they are sent (one
    worker of one thread: one way). Workers that join while the shards run (machines started
    later, an adaptive cluster) take shards only as the split allows: two more would
    otherwise run a shard each at the whole budget, three times it in all. Each shard asks
    one question at a time (concurrency 1), so the server never answers two at once."""
    import logging

    from distributed import Client, LocalCluster

    server.delay = 0.02  # three shards of 84 questions: about 2 s each
    llm = llm_toml(server.base_url, "concurrency = 1\nrequests_per_minute = 60000\n")
    cfg = baseline_config(tmp_path, sample_store, llm)
    out, said, grown = tmp_path / "dask", [], threading.Event()
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR) as cluster:

        def grow_once_answers_arrive():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and server.total < 5:
                time.sleep(0.02)
            cluster.scale(3)
            cluster.wait_for_workers(3, timeout=60)
            grown.set()

        grower = threading.Thread(target=grow_once_answers_arrive, daemon=True)
        grower.start()
        merged = run_on_dask(cfg, out, scheduler=cluster.scheduler_address, echo=said.append)
        grower.join()
        with Client(cluster) as client:
            assert len(client.scheduler_info()["workers"]) == 3
    assert grown.is_set()
    assert (f"3 shards on 1 worker ({cluster.scheduler_address}); LLM rate limits split 1 way: "
            "at most 1 shard at once, however many workers join") in said
    assert server.most_in_flight == 1
    tasks = pd.read_parquet(merged / "tasks.parquet")
    rows = pd.read_parquet(merged / "forecasts.parquet").query("model == 'm'")
    assert len(rows) == len(tasks) == 252 and rows["valid"].all()


@pytest.mark.slow
def test_a_worker_killed_mid_shard_is_replaced_and_the_shard_resumes(tmp_path, sample_store,
                                                                     server, llm_env):
    server.delay = 0.05
    llm = llm_toml(server.base_url, "concurrency = 1\nrequests_per_minute = 6000\n")
    cfg = baseline_config(tmp_path, sample_store, llm)
    out = tmp_path / "dask"
    killed, replacement = [], []

    def kill_a_worker_once_answers_arrive():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            for journal in (out / "shards").glob("*/journal.jsonl"):
                if journal.is_file() and journal.read_text().count("\n") >= 5:
                    pid = _worker_pid_of(journal.parent)
                    if pid:
                        first = set(_workers_of(os.getpid()))
                        os.kill(pid, signal.SIGKILL)
                        killed.append((journal.parent.name, pid))
                        server.delay = 0  # the delay was there to kill mid-shard
                        while time.monotonic() < deadline and not replacement:
                            replacement.extend(v for k, v in _workers_of(os.getpid()).items()
                                               if k not in first)
                            time.sleep(0.05)
                        return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_a_worker_once_answers_arrive, daemon=True)
    killer.start()
    merged = run_on_dask(cfg, out, workers=2, echo=lambda *_: None)
    killer.join()
    assert killed, "no worker was killed: the shards finished before any could be"
    if Path("/proc/self/status").is_file():  # the worker started in its place, like the
        assert replacement and _never_answers_sigint(replacement[0])  # first: no Ctrl-C
    rows = pd.read_parquet(merged / "forecasts.parquet")
    assert rows.groupby(["task_id", "model"]).size().eq(1).all()
    llm_rows = rows[rows["model"] == "m"]
    tasks = pd.read_parquet(merged / "tasks.parquet")
    assert len(llm_rows) == len(tasks) == 252 and llm_rows["valid"].all()
    # a call in flight when the worker died may be made again; answered ones never
    assert max(server.counts.values()) <= 2 and sum(v > 1 for v in server.counts.values()) <= 1
    # nor served again from the response cache the killed worker filled (a shard started over
    # would take every answer it had made from there)
    cached = sum(json.loads(d)["cached"] for d in llm_rows["detail"])
    assert cached <= 1, cached
    assert audit_run(merged) == []


def _worker_pid_of(shard_dir: Path) -> int | None:
    """The process holding a shard's run lock (the worker running it)."""
    lock = shard_dir / ".finbench.lock"
    if not lock.is_file():
        return None
    import json

    try:
        return int(json.loads(lock.read_text())["pid"])
    except (ValueError, KeyError):
        return None


def test_the_dask_executor_refuses_a_shard_of_its_own(tmp_path, sample_store):
    from finbench.cli import main

    cfg = baseline_config(tmp_path, sample_store)
    assert main(["run", str(cfg), "--executor", "dask", "--shard", "2024-12-02:2024-12-31"]) == 2


@pytest.mark.parametrize("address", ["closed port", "nonsense"])
def test_a_scheduler_that_cannot_be_reached_is_named_and_nothing_is_made(
        tmp_path, sample_store, capsys, address):
    """A scheduler address where none answers (a closed port on this machine; Dask's connect
    timeout cut to 2 s) or one Dask cannot read: exit 2 with the address, no run folder."""
    import socket

    import dask

    from finbench.cli import main

    if address == "closed port":
        with socket.socket() as probe:  # a port just freed: nothing listens on it
            probe.bind(("127.0.0.1", 0))
            address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    cfg = baseline_config(tmp_path, sample_store, f'[executor]\nkind = "dask"\n'
                                                  f'scheduler = "{address}"\n')
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        assert main(["run", str(cfg), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"RunError: Dask scheduler {address!r} (--scheduler, or scheduler in the config's " \
           "[executor]): cannot connect (" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("section", "flags", "message"), [
    ('kind = "local"\nscheduler = "tcp://x:8786"\n', [],
     'a scheduler or workers are settings of kind = "dask"'),
    ('kind = "dask"\nscheduler = "tcp://x:8786"\nworkers = 2\n', [],
     "workers sizes the LocalCluster"),
    ('kind = "dask"\nworkers = 0\n', [], "workers is 0: a cluster has at least one worker"),
    ('kind = "dask"\nmonths = 0\n', [], "months is 0: a shard holds at least one month"),
    ('months = 3\n', [], "months (a shard's calendar months) is a setting of kind = \"dask\""),
    ('kind = "dask"\n', ["--workers", "0"], "--workers with the config's [executor] (kind = "
     "'dask'): workers is 0"),
    ("", ["--executor", "dask", "--scheduler", " "], "--executor and --scheduler with the "
     "config's [executor] (kind = 'dask'): scheduler is empty"),
    ('kind = "dask"\nthreads = 2\n', [], "executor.threads"),
    ("", ["--scheduler", "tcp://x:8786"],
     "--scheduler with the config's [executor] (kind = 'local'): a scheduler or workers"),
    ('kind = "dask"\nscheduler = "tcp://x:8786"\n', ["--workers", "2"],
     "--workers with the config's [executor] (kind = 'dask'): workers sizes"),
    ('kind = "dask"\n', ["--shard", "2024-12-02:2024-12-31"],
     "the config's [executor] kind = \"dask\" runs the whole config as month shards: give it "
     "without --shard, --batch, --dry-run, --models or --limit (or give --executor local)"),
])
def test_executor_settings_that_conflict_are_refused_naming_them(tmp_path, sample_store, capsys,
                                                                 section, flags, message):
    from finbench.cli import main

    cfg = baseline_config(tmp_path, sample_store, f"[executor]\n{section}" if section else "")
    assert main(["run", str(cfg), "--out", str(tmp_path / "out"), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before anything ran


@pytest.mark.slow
def test_the_configs_executor_section_runs_it_on_dask_and_the_command_line_overrides_it(
        tmp_path, sample_store):
    """``[executor] kind = "dask"`` makes ``finbench run`` shard the config on a LocalCluster
    of the section's workers; ``--executor local`` runs the same config in one process, with
    the same scores."""
    from finbench.cli import main

    cfg = baseline_config(tmp_path, sample_store,
                          '[executor]\nkind = "dask"\nworkers = 2\nmonths = 2\n')
    assert main(["run", str(cfg), "--out", str(tmp_path / "dask")]) == 0
    assert main(["run", str(cfg), "--out", str(tmp_path / "local"), "--executor", "local"]) == 0
    shards = sorted((tmp_path / "dask" / "shards").iterdir())
    assert [p.name for p in shards] == ["2024-11-25_2024-12-31", "2025-01-02_2025-01-08"]
    # the merge scores every row: its shards write no score file
    assert not [p for p in shards if (p / "scores.parquet").exists()]
    assert not (tmp_path / "local" / "shards").exists()
    assert ((tmp_path / "dask" / "scores.csv").read_bytes()
            == (tmp_path / "local" / "scores.csv").read_bytes())


def test_a_shard_stopped_by_bad_input_hands_its_error_back_instead_of_raising(tmp_path):
    """Bad input fails every attempt alike, so a shard returns its FinbenchError for the
    client to raise, and Dask's retries (for what may pass the next time) are not spent."""
    from finbench.cluster import run_shard
    from finbench.core.config import ConfigText
    from finbench.core.errors import StoreError

    store, rel = damaged_store(tmp_path)
    cfg = ConfigText.read(month_shards_config(tmp_path / "cfg.toml", store))
    got = run_shard(cfg, str(tmp_path / "shard"), "2024-12-02", "2024-12-31", 1.0)
    assert isinstance(got, StoreError) and f"{store / rel}: cannot be read" in str(got)
    assert got.__notes__ == ["in shard 2024-12-02..2024-12-31"]  # said after its line
    assert run_shard(cfg, str(tmp_path / "fine"), "2024-11-25", "2024-11-29", 1.0) == str(
        tmp_path / "fine")


def _workers_of(pid: int) -> dict[int, str]:
    """The worker processes process ``pid`` has started, each with its /proc status text:
    forked by the multiprocessing forkserver it started (a LocalCluster's, where the platform
    has one: a new Python, or a fork of the process itself), or started by multiprocessing's
    spawn."""
    processes = {}
    for entry in Path("/proc").iterdir():
        try:
            processes[entry.name] = ((entry / "status").read_text(),
                                     (entry / "cmdline").read_bytes())
        except OSError:  # not a process, or one that ended meanwhile
            continue
    own = processes.get(str(pid), ("", None))[1]
    servers = {name for name, (status, line) in processes.items()
               if f"\nPPid:\t{pid}\n" in status
               and (b"multiprocessing.forkserver" in line or line == own)}
    return {int(name): status for name, (status, line) in processes.items()
            if (f"\nPPid:\t{pid}\n" in status and b"spawn_main" in line)
            or any(f"\nPPid:\t{server}\n" in status for server in servers)}


def _never_answers_sigint(status: str) -> bool:
    """Whether a process (its /proc status text) blocks or ignores SIGINT."""
    masks = dict(line.split(":\t") for line in status.splitlines() if ":\t" in line)
    return any(int(masks[key], 16) & 1 << (signal.SIGINT - 1) for key in ("SigBlk", "SigIgn"))


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["the cluster starts", "the shards run"])
def test_ctrl_c_on_a_local_cluster_is_one_line_from_the_client_alone(tmp_path, sample_store,
                                                                     moment, server, llm_env):
    """Ctrl-C in a terminal signals every process of the group, the LocalCluster's workers
    too: they never answer it, and the client does (one line, exit 130, the cluster closed),
    so no worker prints a traceback. Pressed while the cluster starts (its workers importing,
    seconds on any machine), it is kept until the start is over, not lost; pressed while the
    shards run, the same command then finishes the run."""
    import subprocess
    import sys

    if moment == "the cluster starts" and not Path(f"/proc/{os.getpid()}/status").is_file():
        pytest.skip("no /proc here to see the cluster's workers start")
    server.delay = 0.02  # a language model answering late: the shards are still at it
    cfg = baseline_config(tmp_path, sample_store, llm_toml(server.base_url))
    command = [sys.executable, "-m", "finbench", "run", str(cfg), "--out", str(tmp_path / "run"),
               "--executor", "dask", "--workers", "2"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    started = subprocess.Popen(command, env=env, start_new_session=True, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while started.poll() is None and not (
            bool(_workers_of(started.pid)) if moment == "the cluster starts"
            else server.total >= 5):  # the shards have begun answering
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.killpg(started.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    try:
        _, err = started.communicate(timeout=120)
    except subprocess.TimeoutExpired:  # the command hangs: ended here, its pipes closed
        os.killpg(started.pid, signal.SIGKILL)
        _, err = started.communicate()
        pytest.fail(f"the interrupted command did not end within 120 s: {err[-2000:]}")
    server.delay = 0
    assert started.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    # the last line it says (progress before it: on stderr too)
    assert err.strip().splitlines()[-1] == (
        "finbench run: interrupted; what it finished is kept (`finbench run` and `finbench "
        "data fetch`, given again, go on from there)")
    if moment == "the cluster starts":
        assert not (tmp_path / "run" / "shards").exists()  # no shard was sent
        return
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert audit_run(tmp_path / "run") == []


def test_a_local_cluster_starts_beside_another_on_the_machine():
    """Two runs on one machine at once (two users; this suite on two workers): with 8787, the
    usual dashboard port, taken, the LocalCluster starts without a warning (warnings are
    errors here), its scheduler's HTTP server on a loopback port of the system's choosing."""
    import socket

    from distributed import LocalCluster

    from finbench.cluster import _local_cluster

    taken = socket.socket()
    try:
        taken.bind(("127.0.0.1", 8787))
        taken.listen()
    except OSError:  # another process holds it already: the condition stands all the same
        pass
    try:
        cluster = _local_cluster(LocalCluster, 1)
        try:
            server = cluster.scheduler.http_server
            assert server.address == "127.0.0.1" and server.port != 8787
        finally:
            cluster.close()
    finally:
        taken.close()


def test_ctrl_c_while_the_client_talks_to_the_cluster_waits_for_a_check():
    """A KeyboardInterrupt inside one of Dask's client calls can leave the command waiting
    forever; so a first Ctrl-C is kept until the run looks, a second one interrupts at once,
    and the handler before is back afterwards."""
    from finbench.cluster import _deferred_interrupt

    before = signal.getsignal(signal.SIGINT)
    with _deferred_interrupt() as interrupt:
        interrupt.check()  # nothing pressed
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler has run: nothing raised here
        with pytest.raises(KeyboardInterrupt):
            interrupt.check()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="no signal masks here")
def test_ctrl_c_while_the_cluster_starts_is_held_back_and_reaches_the_handler_after():
    """While the cluster starts, SIGINT is blocked in this thread and in the threads started
    meanwhile (the processes they start inherit that), and a Ctrl-C then is kept, not lost:
    the handler in place gets it once the start is over (or at once, through a thread started
    before, where one does not block it: pytest has some)."""
    from finbench.cluster import _sigint, _sigint_held

    got, masks = [], []
    with _sigint(lambda signum, frame: got.append(signum)):
        with _sigint_held():
            os.kill(os.getpid(), signal.SIGINT)
            thread = threading.Thread(
                target=lambda: masks.append(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
            thread.start()
            thread.join()
        time.sleep(0.05)
        assert got == [signal.SIGINT]
    assert signal.SIGINT in masks[0]
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def _worker_dies(*args):
    """A shard's task that kills the worker running it (as the kernel's OOM killer would)."""
    os._exit(9)


@pytest.mark.slow
def test_a_shard_whose_workers_keep_dying_is_named_with_what_is_kept(tmp_path, sample_store,
                                                                    monkeypatch):
    """Dask gives up on a task after its workers died a number of times
    (``distributed.scheduler.allowed-failures``; here 0, so on the first): the run stops
    with one line naming the shard, what was kept and how to go on, not Dask's KilledWorker
    traceback."""
    import dask

    import finbench.cluster
    from finbench.core.errors import RunError

    monkeypatch.setattr(finbench.cluster, "run_shard", _worker_dies)
    cfg = baseline_config(tmp_path, sample_store)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), pytest.raises(
            RunError) as caught:
        run_on_dask(cfg, tmp_path / "dask", workers=1, echo=lambda *_: None)
    shard, said = str(caught.value).split(": ", 1)  # the first shard Dask gave up on
    assert Path(shard).parent == tmp_path / "dask" / "shards"
    assert Path(shard).name in {f"{a}_{b}" for a, b in shard_ranges(load_config(cfg))}
    assert said == (
        "the shard's worker died (out of memory, or killed) as often as the "
        "cluster allows (distributed.scheduler.allowed-failures); what the shards made is "
        "kept: give the same command again to go on from there, with more memory per worker "
        "if they ran out (a LocalCluster: fewer --workers)")


@pytest.mark.slow
def test_a_scheduler_lost_mid_run_is_named_with_what_is_kept(tmp_path, sample_store, server,
                                                             llm_env):
    """The cluster given by address goes away while its shards run (its scheduler stopped,
    or the machine lost): the run stops with one line naming the scheduler, what is kept and
    how to go on, not the cancelled future's traceback; the same command on a cluster that
    answers finishes the run."""
    import logging

    import dask
    from distributed import LocalCluster

    from finbench.core.errors import RunError

    server.delay = 0.05  # shards still running when the scheduler goes
    llm = llm_toml(server.base_url, "concurrency = 1\nrequests_per_minute = 6000\n")
    cfg = baseline_config(tmp_path, sample_store, llm)
    out = tmp_path / "dask"
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL)
    address, caught = cluster.scheduler_address, []

    def run_it():
        try:
            run_on_dask(cfg, out, scheduler=address, echo=lambda *_: None)
        except BaseException as exc:  # noqa: BLE001 - what the run raised, for the test
            caught.append(exc)

    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        runner = threading.Thread(target=run_it)
        runner.start()
        deadline = time.monotonic() + 60
        while not list(out.glob("shards/*/journal.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.05)
        cluster.close()
        runner.join(timeout=120)
    assert not runner.is_alive(), "the run did not end when its scheduler went"
    server.delay = 0
    assert len(caught) == 1 and isinstance(caught[0], RunError), caught
    head, said = str(caught[0]).split(" was cancelled: ", 1)
    assert head.startswith(f"{address}: shard ")  # the first shard Dask cancelled
    assert head.split(" ")[-1] in {f"{a}_{b}" for a, b in shard_ranges(load_config(cfg))}
    assert said == ("the scheduler was lost while the shards ran, or the task was cancelled "
                    "there; what the shards made is kept: give the same command again, with a "
                    "scheduler that answers, to go on from there")
    done = run_on_dask(cfg, out, workers=2, echo=lambda *_: None)
    assert audit_run(done) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_the_runs_own_workers_keep_freed_memory_as_its_commands_do():
    """A shard frees and allocates arrays of megabytes as a run does, but a worker process was
    no ``finbench`` command: glibc handed a freed block back and the next was paid again in
    page faults. The workers of the run's own LocalCluster now keep it."""
    from distributed import Client, LocalCluster

    from finbench import cluster as cluster_module
    from tests.heap_probe import BLOCK, free_after_a_freed_block

    cluster = cluster_module._local_cluster(LocalCluster, 1)
    try:
        with Client(cluster) as client:
            [free] = client.run(free_after_a_freed_block).values()
            assert free < BLOCK  # handed back
            client.register_plugin(cluster_module._kept_memory())
            [free] = client.run(free_after_a_freed_block).values()
            assert free >= BLOCK  # kept
    finally:
        cluster.close()


def test_the_runs_own_cluster_samples_dasks_diagnostics_seldom():
    """Dask's diagnostics for a dashboard (each worker's profiler looking at every thread's
    stack every 10 ms, every server's event-loop check every 20 ms, the scheduler's system
    monitor every 500 ms) cost CPU on every core of a run's own LocalCluster, where no one is
    shown a dashboard: there the profiler is off and the checks are seldom, for its scheduler
    and its workers alike; a cluster of the caller's keeps Dask's settings."""
    from distributed import Client, LocalCluster

    from finbench import cluster as cluster_module

    def facts(dask_worker):
        return ("profile" in dask_worker.periodic_callbacks,
                dask_worker.periodic_callbacks["tick"].callback_time,
                dask_worker.periodic_callbacks["monitor"].callback_time)

    cluster = cluster_module._local_cluster(LocalCluster, 2)
    try:
        with Client(cluster) as client:
            workers = client.run(facts)
            callbacks = cluster.scheduler.periodic_callbacks
            scheduler = (callbacks["tick"].callback_time, callbacks["monitor"].callback_time)
    finally:
        cluster.close()
    assert list(workers.values()) == [(False, 1000, 5000)] * 2
    assert scheduler == (1000, 5000)
    theirs = LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                          dashboard_address="127.0.0.1:0")
    try:
        with Client(theirs) as client:
            assert list(client.run(facts).values()) == [(True, 20, 500)]
    finally:
        theirs.close()


@pytest.mark.skipif(sys.platform == "win32", reason="no forkserver on Windows")
def test_the_runs_own_workers_are_forked_from_one_import_and_counted_in_its_cpu():
    """Dask's default starts each worker as a new Python that imports Dask and FinBench
    again. The run's own LocalCluster forks them from a forkserver that imported them once;
    the server is stopped when the cluster is done, so no process outlives the run and the
    workers' CPU is counted in the run's children, as a spawned worker's was."""
    import resource
    from multiprocessing import forkserver

    from distributed import Client, LocalCluster

    from finbench import cluster as cluster_module

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    before = children_cpu()
    with cluster_module._forked_workers():
        cluster = cluster_module._local_cluster(LocalCluster, 2)
        try:
            with Client(cluster) as client:
                server = forkserver._forkserver._forkserver_pid
                # (builtins and text, so that unpickling the call imports nothing of ours)
                facts = client.run(eval, "(__import__('os').getppid(), 'finbench.runner' in "
                                   "__import__('sys').modules, sum(__import__('resource')"
                                   ".getrusage(0)[:2]))")
        finally:
            cluster.close()
    assert len(facts) == 2 and server is not None
    assert {parent for parent, _, _ in facts.values()} == {server}
    assert all(loaded for _, loaded, _ in facts.values())  # before any shard asked for it
    assert forkserver._forkserver._forkserver_pid is None
    assert not _running(server)  # ended and reaped
    assert children_cpu() - before >= sum(cpu for _, _, cpu in facts.values())


# what a process of its own reports of the forkserver its LocalCluster's workers come from
FORK_SERVER_FACTS = """
import json, os, signal, sys, threading, time
from distributed import Client, LocalCluster
from finbench import cluster
if __name__ == "__main__":
    if sys.argv[1] == "busy":  # a thread of the caller's running
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
    own = open("/proc/self/cmdline", "rb").read()
    with cluster._forked_workers():
        c = cluster._local_cluster(LocalCluster, 2)
        with Client(c) as client:
            from multiprocessing import forkserver
            server = forkserver._forkserver._forkserver_pid
            line = open(f"/proc/{server}/cmdline", "rb").read()
            workers = client.run(eval, "(__import__('os').getppid(), "
                                 "open('/proc/self/status').read())")
        c.close()
    mask = signal.SIGINT - 1
    new = b"from multiprocessing." + b"forkserver import main"  # (not this text: it is in own)
    print(json.dumps({"fork": line == own, "new_python": new in line,
                      "parents": sorted({p == server for p, _ in workers.values()}),
                      "sigint_blocked": [any(int(l.split()[1], 16) >> mask & 1
                                             for l in st.splitlines()
                                             if l.startswith(("SigBlk:", "SigIgn:")))
                                         for _, st in workers.values()],
                      "ended": not os.path.exists(f"/proc/{server}")}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the server is forked on Linux")
@pytest.mark.parametrize("caller", ["alone", "busy"])
def test_the_forkserver_is_a_fork_of_the_run_unless_a_thread_of_its_runs(caller):
    """The run has imported Dask and FinBench, and a forkserver started as a new Python
    imported them again (1.5-1.9 s of CPU of a year's six-month shards on 2 cores): so the
    server is a fork of the run's own process, where nothing but its main thread runs. Its
    workers are as a new server's would make them: forked by it, SIGINT blocked; it ends with
    the cluster. Where another thread of the caller's runs (a lock it holds would stay held in
    the fork), the server is a new Python, as multiprocessing starts it."""
    import json
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", FORK_SERVER_FACTS, caller], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout.splitlines()[-1])
    assert facts["fork"] is (caller == "alone")
    assert facts["new_python"] is (caller == "busy")
    assert facts["parents"] == [True]  # both workers forked by the server
    assert facts["sigint_blocked"] == [True, True]
    assert facts["ended"]


FORK_REFUSED = """
import json, os
from multiprocessing import forkserver, resource_tracker, util
from finbench.core import fork_server
server = forkserver.ForkServer()
resource_tracker.ensure_running()  # (its pipe: opened whether or not the server is forked)
temp = util.get_temp_dir()
before = (sorted(os.listdir("/proc/self/fd")), sorted(os.listdir(temp)))
def refused():
    raise BlockingIOError(11, "Resource temporarily unavailable")
os.fork = refused
said = fork_server.serve_from_here(server, [])
after = (sorted(os.listdir("/proc/self/fd")), sorted(os.listdir(temp)))
print(json.dumps([said, server._forkserver_pid, before == after]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the server is forked on Linux")
def test_a_fork_the_system_refuses_leaves_the_server_to_multiprocessing():
    """Where the system refuses a fork (no memory or processes to spare), nothing is left of
    the attempt (no descriptor, no socket file, no server recorded) and it says so, so that
    multiprocessing starts its server as usual when the first worker starts."""
    import json
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", FORK_REFUSED], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [False, None, True]


@pytest.mark.skipif(sys.platform == "win32", reason="no forkserver on Windows")
def test_a_forkserver_of_the_callers_own_is_left_alone_and_the_workers_spawned():
    """A process that runs a forkserver of its own (its environment and signal mask set when
    it started) keeps it: the run's workers are spawned, as Dask starts them by default,
    and the caller's server is still running after the run."""
    import multiprocessing
    from multiprocessing import forkserver

    from distributed import Client, LocalCluster

    from finbench import cluster as cluster_module

    theirs = multiprocessing.get_context("forkserver").Process(target=int)
    theirs.start()
    theirs.join()
    server = forkserver._forkserver._forkserver_pid
    try:
        with cluster_module._forked_workers():
            cluster = cluster_module._local_cluster(LocalCluster, 1)
            try:
                with Client(cluster) as client:
                    [parent] = client.run(os.getppid).values()
            finally:
                cluster.close()
        assert parent == os.getpid()  # spawned by this process, not forked by the server
        assert forkserver._forkserver._forkserver_pid == server
        assert _running(server)
    finally:
        forkserver._forkserver._stop()


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists (running, or ended and not yet reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
