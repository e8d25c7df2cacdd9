"""Writing output files: each to a temporary name, renamed into place once whole, so a reader
finds the old file or the new one and never half of one; a disk that fills up (or a file-size
limit) stops the writer with one :class:`DiskFullError` naming the file, never a traceback."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
from pathlib import Path

import numpy as np

from finbench.core.errors import FinbenchError

OUT_OF_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class DiskFullError(FinbenchError):
    """A file could not be written for lack of space (or over a file-size limit)."""


@contextlib.contextmanager
def writing(path: Path, tmp: Path | None = None):
    """Around the writing of ``path`` (through ``tmp``, if given): an out-of-space error
    becomes a :class:`DiskFullError` naming the file, what was written and what is free."""
    try:
        yield
    except OSError as exc:
        if not out_of_space(exc):
            raise
        raise DiskFullError(disk_full_message(Path(path), tmp, exc)) from None


def out_of_space(exc: BaseException) -> bool:
    """Whether ``exc`` says a disk is full or a file is over its size limit (Arrow's writers
    raise a plain OSError whose text carries the errno)."""
    if not isinstance(exc, OSError):
        return False
    if exc.errno in OUT_OF_SPACE:
        return True
    text = str(exc)
    return any(f"[errno {code}]" in text.lower() or os.strerror(code) in text
               for code in OUT_OF_SPACE)


SQLITE_SPACE = 64 * 1024  # a write of SQLite that fails this close to a limit ran out of it
_SQLITE_SIDES = ("", "-wal", "-shm", "-journal")


def sqlite_out_of_space(exc: BaseException, path: Path) -> OSError | None:
    """The out-of-space error that ``exc``, an error of SQLite writing the database ``path``,
    stands for (None when it is another one): SQLite says ``SQLITE_FULL`` of a full disk, but
    only "disk I/O error" (``SQLITE_IOERR_*``) when a file passes the process's file-size
    limit or the disk fills while its write-ahead log grows; such an error is out of space
    when the filesystem has less than :data:`SQLITE_SPACE` bytes free, or one of the
    database's files is within that of the file-size limit."""
    import resource
    import sqlite3

    if not isinstance(exc, sqlite3.OperationalError):
        return None
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name == "SQLITE_FULL":
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    if not name.startswith("SQLITE_IOERR"):
        return None
    path = Path(path)
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    sizes = [f.stat().st_size for f in (path.with_name(path.name + s) for s in _SQLITE_SIDES)
             if f.is_file()]
    if limit != resource.RLIM_INFINITY and any(size + SQLITE_SPACE >= limit for size in sizes):
        return OSError(errno.EFBIG, os.strerror(errno.EFBIG))
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        return None
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)) if free < SQLITE_SPACE else None


@contextlib.contextmanager
def sqlite_writing(path: Path):
    """Around SQLite's writes to the database ``path``: running out of space (a full disk, a
    file-size limit: :func:`sqlite_out_of_space`) becomes a :class:`DiskFullError` naming
    the file, as every other write of a run says it."""
    try:
        yield
    except Exception as exc:
        space = sqlite_out_of_space(exc, path)
        if space is None:
            raise
        raise DiskFullError(disk_full_message(Path(path), None, space)) from None


def disk_full_message(path: Path, tmp: Path | None, exc: OSError) -> str:
    written = tmp.stat().st_size if tmp is not None and tmp.exists() else None
    try:
        free = shutil.disk_usage(path.parent if path.parent.exists() else Path.cwd()).free
    except OSError:
        free = None
    said = [f"{path}: cannot be written: {_reason(exc)}"]
    if written is not None:
        said.append(f"{written / 1e6:.1f} MB of it were written when it failed")
    if free is not None:
        said.append(f"{free / 1e6:.1f} MB are free on its filesystem")
    return ("; ".join(said) + ". Free some space (or raise the limit) and give the same command "
            "again: what is already written is kept and nothing is done twice")


def _reason(exc: OSError) -> str:
    code = exc.errno if exc.errno in OUT_OF_SPACE else next(
        (c for c in OUT_OF_SPACE if f"[errno {c}]" in str(exc).lower()), errno.ENOSPC)
    return {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
            errno.EFBIG: "file too large (a file-size limit)"}[code]


def write_atomic(path: Path, write) -> None:
    """``write(temporary path)``, then rename it to ``path``: never a torn file at ``path``,
    and no temporary file left when writing fails."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with writing(path, tmp):
            write(tmp)
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def sync_file(path: Path) -> None:
    """The file's content on disk (fsync), e.g. of one written without it, before a record
    that names it is written."""
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())


def write_json(path: Path, payload: dict) -> None:
    """``payload`` as indented JSON, written atomically."""
    text = json.dumps(payload, indent=2, default=str) + "\n"
    write_atomic(path, lambda p: Path(p).write_text(text))


def write_text(path: Path, text: str) -> None:
    """Text written atomically."""
    write_atomic(path, lambda p: Path(p).write_text(text))


def formatted_floats(frame, float_format: str):
    """``frame`` with its float columns as text, each value ``float_format % value`` and a
    missing one empty: what ``to_csv(float_format=...)`` writes, made by one comprehension a
    column, where pandas' own formatting goes through several layers of calls per value (a
    quarter of a second for the 2,000 rows of a year's scores)."""
    floats = [c for c in frame.columns  # numpy floats (nullable ones are left to pandas)
              if isinstance(frame[c].dtype, np.dtype) and frame[c].dtype.kind == "f"]
    if not floats:
        return frame
    return frame.assign(**{c: [float_format % v if v == v else "" for v in frame[c].tolist()]
                           for c in floats})
