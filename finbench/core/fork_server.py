"""A multiprocessing forkserver forked from this process, not started as a new Python.

multiprocessing starts its forkserver by running a new interpreter that imports the preload
modules, then forks each child from it. A run's LocalCluster needs Dask and FinBench in its
workers, which this process has imported already: started as a new Python, the server imported
them again (1.5-1.9 s of CPU, about a tenth of a year's run in six-month shards on 2 cores).
:func:`serve_from_here` forks this process instead and runs multiprocessing's own server loop
(``multiprocessing.forkserver.main``) in the child, so the workers are forked from a copy of
this process and import nothing the run has not.

Forking is safe only while this process runs no other thread (a lock one holds stays held in
the child), so it is done only when the threads are the main one and jemalloc's background
threads (pyarrow's allocator, made for fork: its locks are taken around it), on Linux, where
``/proc`` lists them, and where multiprocessing's server loop is the one this code knows.
Otherwise nothing is done and multiprocessing starts its server as usual.

The child is made to look like the server multiprocessing would start (a worker sets Dask's
``distributed.nanny.pre-spawn-environ`` in its own environment either way): SIGINT is blocked
in it, as in a server started while the cluster starts (:func:`_sigint_held` in
:mod:`finbench.cluster`), and its workers inherit that; it leaves by ``os._exit``, never by
this process's exit handlers. As any fork, it and its workers hold open what this process
held open when it forked (its streams are where this process's are: a log line of a worker
goes where the run's go), until the run's cluster closes and the server with it.
"""

from __future__ import annotations

import inspect
import os
import signal
import socket
import sys
import threading

# multiprocessing's server loop, as Python 3.11-3.13 define it (3.14 adds an authentication key)
SERVER_LOOP = ["listener_fd", "alive_r", "preload", "main_path", "sys_path"]
FORK_SAFE_THREADS = {"jemalloc_bg_thd"}  # jemalloc's own, handled around fork by jemalloc


def serve_from_here(server, preload: list[str]) -> bool:
    """Start ``server`` (multiprocessing's ForkServer, not running) as a fork of this process,
    which imports ``preload`` first. True when it did; False (and nothing done) when forking
    is not safe here or the server loop is not the known one."""
    import importlib
    from multiprocessing import connection, forkserver, resource_tracker, util

    for name in preload:  # (what the server would import: here, imported already)
        importlib.import_module(name)
    if (not sys.platform.startswith("linux") or server._forkserver_pid is not None
            or list(inspect.signature(forkserver.main).parameters) != SERVER_LOOP
            or not single_threaded()):
        return False
    resource_tracker.ensure_running()  # as multiprocessing does before its server starts
    listener = socket.socket(socket.AF_UNIX)
    try:
        address = connection.arbitrary_address("AF_UNIX")
        listener.bind(address)
        if not util.is_abstract_socket_namespace(address):
            os.chmod(address, 0o600)
        listener.listen()
        alive_r, alive_w = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice
            if stream is not None:
                stream.flush()
        try:
            pid = os.fork()
        except OSError:  # (no memory or processes to spare): multiprocessing's way, then
            os.close(alive_r)
            os.close(alive_w)
            if not util.is_abstract_socket_namespace(address):
                os.unlink(address)
            return False
        if pid == 0:
            os.close(alive_w)  # (the server's end of the run is this pipe's other end closing)
            _serve(listener.fileno(), alive_r, preload)  # never returns
        os.close(alive_r)
    finally:
        listener.close()
    server._forkserver_address = address
    server._forkserver_alive_fd = alive_w
    server._forkserver_pid = pid
    return True


def single_threaded() -> bool:
    """Whether this process runs no thread but its main one (and jemalloc's own)."""
    if threading.active_count() != 1:
        return False
    try:
        tasks = os.listdir("/proc/self/task")
        names = {int(t): _thread_name(t) for t in tasks}
    except OSError:
        return False
    return all(tid == os.getpid() or name in FORK_SAFE_THREADS for tid, name in names.items())


def _thread_name(tid: str) -> str:
    with open(f"/proc/self/task/{tid}/comm") as fh:
        return fh.read().strip()


def _serve(listener_fd: int, alive_r: int, preload: list[str]):
    """The server's life, in the forked child: multiprocessing's loop until this process's
    end closes the pipe, then ``os._exit``."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a new Python's handler
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        from multiprocessing import forkserver

        try:
            forkserver.main(listener_fd, alive_r, preload)
        except SystemExit:  # how the loop ends when this process has gone
            code = 0
    except BaseException:  # noqa: BLE001 - said on stderr, as the server would
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)
