"""Object storage: what reading the store and keeping the run directory in a bucket cost,
against the same run on local disk, measured in one run on this machine.

A loopback S3-compatible server (moto in server mode, in a process of its own on 127.0.0.1)
stands in for the object store: it has no network between it and the run, but it is a Python
server, so its per-request cost is far above a real store's, and its bandwidth is this
machine's memory. The ratios bound what the protocol and FinBench's mirroring add; a real
store adds its own latency and bandwidth (docs/performance.md projects from both).

Prints, for a baselines-only run (four baselines) of synthetic minute bars:
  - the run with store and run directory on local disk (the reference);
  - the store in the bucket (read in place through pyarrow's S3 filesystem);
  - store and run directory in the bucket (the run mirrored from a scratch folder);
  - the same as month shards on a Dask LocalCluster of 2 workers, merged in the bucket;
with the bytes of the store read and of the run directory uploaded; then
  - the store in a bucket whose every answer waits ``--latency-ms`` (a real store's round
    trip; a second loopback server, S3 alone), read ahead by the threads a run uses for object
    storage (``finbench.data.store.REMOTE_READERS``) and by one, as from local disk.
Run: .venv/bin/python benchmarks/bench_object_store.py [--tickers 100 --sessions 42]
[--latency-ms 20]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scale import write_store  # noqa: E402

from finbench.core.location import copy_tree, files_under, filesystem  # noqa: E402

BASELINES = ("coin", "base_rate", "momentum", "climatology")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_s3() -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                      AWS_REGION="us-east-1", AWS_ENDPOINT_URL=endpoint,
                      AWS_EC2_METADATA_DISABLED="true")
    import pyarrow.fs as pafs

    deadline = time.monotonic() + 30
    while True:
        try:
            pafs.S3FileSystem(endpoint_override=endpoint, scheme="http",
                              allow_bucket_creation=True).create_dir("bench")
            return proc, "s3://bench"
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


SLOW_S3 = """
import sys, threading, time, logging
from moto.moto_server.threaded_moto_server import MotoRequestHandler
from moto.server import create_backend_app
from werkzeug.serving import make_server
logging.getLogger("werkzeug").setLevel(logging.ERROR)
app, wait = create_backend_app("s3"), float(sys.argv[2])
def slow(environ, start_response):  # each answer a round trip later
    time.sleep(wait)
    return app(environ, start_response)
make_server("127.0.0.1", int(sys.argv[1]), slow, threaded=True,
            request_handler=MotoRequestHandler).serve_forever()
"""


def start_slow_s3(latency: float) -> tuple[subprocess.Popen, str]:
    """A second loopback S3 server (S3 alone) answering each request ``latency`` seconds
    late; returns it and its endpoint (the environment's stays the first server's)."""
    import pyarrow.fs as pafs

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SLOW_S3, str(port), str(latency)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            pafs.S3FileSystem(endpoint_override=endpoint, scheme="http",
                              allow_bucket_creation=True).create_dir("slow")
            return proc, endpoint
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def config(folder: Path, store: str, tickers: list[str], start, end, name: str) -> Path:
    cfg = folder / f"{name}.toml"
    cfg.write_text(f'[data]\nstore = "{store}"\n[tasks]\ntickers = {tickers!r}\n'
                   f'start = "{start}"\nend = "{end}"\n[scores]\nrows_csv = false\n'
                   + "".join(f'[[models]]\nname = "{k}"\nkind = "{k}"\n' for k in BASELINES))
    return cfg


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def size(where: str | Path) -> int:
    fs, root = filesystem(where)
    return sum(files_under(fs, root).values())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tickers", type=int, default=100)
    parser.add_argument("--sessions", type=int, default=42)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    args = parser.parse_args()
    from finbench.cluster import run_on_dask
    from finbench.runner import run

    proc, bucket = start_s3()
    try:
        with tempfile.TemporaryDirectory(dir=ROOT / "results") as tmp:
            tmp = Path(tmp)
            os.environ["FINBENCH_SCRATCH"] = str(tmp / "scratch")
            days, rows = write_store(tmp / "store", args.tickers, args.sessions)
            upload = timed(lambda: copy_tree(tmp / "store", f"{bucket}/store"))
            tickers = [f"T{i:03d}" for i in range(args.tickers)]
            first, last = days[0].date(), days[-1].date()
            local_cfg = config(tmp, str(tmp / "store"), tickers, first, last, "local")
            s3_cfg = config(tmp, f"{bucket}/store", tickers, first, last, "s3")
            quiet = {"echo": lambda *_: None}
            rows_ = [("store and run on local disk (reference)",
                      timed(lambda: run(local_cfg, tmp / "local", **quiet)), None),
                     ("store in the bucket, run on local disk",
                      timed(lambda: run(s3_cfg, tmp / "s3store", **quiet)), None),
                     ("store and run directory in the bucket",
                      timed(lambda: run(s3_cfg, f"{bucket}/runs/one", **quiet)),
                      f"{bucket}/runs/one"),
                     ("month shards on a LocalCluster of 2 workers, all in the bucket",
                      timed(lambda: run_on_dask(s3_cfg, f"{bucket}/runs/dask", workers=2,
                                                **quiet)), f"{bucket}/runs/dask")]
            store_mb = size(tmp / "store") / 1e6
            print(f"{rows:,} bars ({args.tickers} tickers x {len(days)} sessions), store "
                  f"{store_mb:.1f} MB, uploaded to the bucket in {upload:.2f} s "
                  f"({store_mb / upload:.0f} MB/s)")
            ref = rows_[0][1]
            print(f"{'':64s}{'seconds':>9s}{'vs local':>10s}{'run dir MB':>12s}")
            for what, seconds, out in rows_:
                mb = f"{size(out) / 1e6:12.1f}" if out else f"{'':12s}"
                print(f"{what:64s}{seconds:9.2f}{seconds / ref:9.2f}x{mb}")
            slow_rows(tmp, args.latency_ms / 1000, tickers, first, last, ref)
    finally:
        proc.terminate()
        proc.wait()


def slow_rows(tmp: Path, latency: float, tickers, first, last, ref: float) -> None:
    """The store in a bucket answering ``latency`` late, read ahead by the run's threads for
    object storage and by one."""
    from finbench.data import store as store_module
    from finbench.runner import run

    proc, endpoint = start_slow_s3(latency)
    first_endpoint = os.environ["AWS_ENDPOINT_URL"]
    readers = store_module.REMOTE_READERS
    try:
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        copy_tree(tmp / "store", "s3://slow/store")
        cfg = config(tmp, "s3://slow/store", tickers, first, last, "slow")
        quiet = {"echo": lambda *_: None}
        many = timed(lambda: run(cfg, tmp / "slow_many", **quiet))
        store_module.REMOTE_READERS = 1
        one = timed(lambda: run(cfg, tmp / "slow_one", **quiet))
    finally:
        store_module.REMOTE_READERS = readers
        os.environ["AWS_ENDPOINT_URL"] = first_endpoint
        proc.terminate()
        proc.wait()
    ms = latency * 1000
    print(f"{f'store in a bucket answering {ms:.0f} ms late, {readers} threads reading':64s}"
          f"{many:9.2f}{many / ref:9.2f}x")
    print(f"{'  the same, one thread reading (as from local disk)':64s}"
          f"{one:9.2f}{one / ref:9.2f}x   ({one / many:.1f}x the {readers} threads)")


if __name__ == "__main__":
    main()
