"""Exchange sessions kept between commands, in FinBench's cache folder.

exchange-calendars builds a calendar from its holiday rules each time it is asked (0.13-0.19 s
for XNYS over thirty years here, after 0.06-0.1 s to import it), and every FinBench command
asks for the same few thousand dates again. This keeps what FinBench reads of a calendar (its
sessions, and each one's open and close) in one small file per calendar and range, named by
the versions of exchange-calendars and pandas that made it: a new version of either makes
new files. A file is used only when it is whole and consistent (its own checksum, its name
and range, sessions in order, each open before its close); anything else is made again from
the library and written over. A folder that cannot be written leaves every command as it
was: it builds the calendar each time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from urllib.parse import quote

import numpy as np

CACHE_ENV = "FINBENCH_CACHE_DIR"
FORMAT = 1  # of the files below; a change of their layout takes the next number
ARRAYS = ("sessions", "opens", "closes")  # naive session dates, and UTC instants, as int64 ns


def cache_root() -> Path:
    """FinBench's cache folder: ``$FINBENCH_CACHE_DIR``, else ``~/.cache/finbench``."""
    base = os.environ.get(CACHE_ENV)
    return Path(base) if base else Path.home() / ".cache" / "finbench"


@functools.lru_cache(maxsize=1)
def library_versions() -> str | None:
    """The versions whose calendars these files hold (read from the installed packages'
    metadata, not imported); None where that metadata is missing: then nothing is kept."""
    try:
        return f"xcals{version('exchange_calendars')}-pandas{version('pandas')}-f{FORMAT}"
    except PackageNotFoundError:
        return None


def _path(kind: str, suffix: str) -> Path:
    return cache_root() / "calendars" / f"{kind}-{library_versions()}{suffix}"


def sessions_path(name: str, first: str, last: str) -> Path:
    """The file of calendar ``name`` pinned to ``[first, last]`` (ISO dates)."""
    return _path(f"{quote(name, safe='')}-{first}-{last}", ".npz")


def load_sessions(name: str, first: str, last: str) -> dict[str, np.ndarray] | None:
    """The arrays :data:`ARRAYS` of the file for ``name`` over ``[first, last]``; None when
    there is none, or it is not whole and consistent."""
    if library_versions() is None:
        return None
    path = sessions_path(name, first, last)
    try:
        with open(path, "rb") as f, np.load(f, allow_pickle=False) as data:
            got = {key: data[key] for key in (*ARRAYS, "key", "sha256")}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    arrays = {key: got[key] for key in ARRAYS}
    if str(got["key"]) != _key(name, first, last) or str(got["sha256"]) != _digest(arrays):
        return None
    return arrays if _consistent(arrays, first, last) else None


def save_sessions(name: str, first: str, last: str, arrays: dict[str, np.ndarray]) -> None:
    """Keep ``arrays`` for ``name`` over ``[first, last]`` (written whole under its final
    name, or not at all)."""
    _write(sessions_path(name, first, last),
           lambda f: np.savez(f, key=np.str_(_key(name, first, last)),
                              sha256=np.str_(_digest(arrays)), **arrays))


def load_names() -> set[str] | None:
    """The calendar names (aliases included) the installed exchange-calendars knows."""
    if library_versions() is None:
        return None
    try:
        names = json.loads(_path("names", ".json").read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(names, list) and names and all(isinstance(n, str) for n in names)
    return set(names) if ok else None


def save_names(names: list[str]) -> None:
    _write(_path("names", ".json"),
           lambda f: f.write(json.dumps(sorted(names)).encode()))


def _key(name: str, first: str, last: str) -> str:
    return f"{name} {first} {last} {library_versions()}"


def _digest(arrays: dict[str, np.ndarray]) -> str:
    sha = hashlib.sha256()
    for key in ARRAYS:
        sha.update(np.ascontiguousarray(arrays[key], dtype="<i8").tobytes())
    return sha.hexdigest()


def _consistent(arrays: dict[str, np.ndarray], first: str, last: str) -> bool:
    """Same lengths, int64, sessions strictly increasing midnights inside ``[first, last]``,
    each open before its close."""
    s, o, c = (arrays[key] for key in ARRAYS)
    if any(a.dtype != np.int64 or a.ndim != 1 for a in (s, o, c)) or not (
            len(s) == len(o) == len(c) > 0):
        return False
    day = 86_400 * 10**9
    lo, hi = (np.datetime64(d, "ns").astype(np.int64) for d in (first, last))
    return bool((np.diff(s) > 0).all() and (s % day == 0).all() and s[0] >= lo
                and s[-1] <= hi and (o < c).all())


def _write(path: Path, write) -> None:
    """``write(file)`` to a temporary file beside ``path``, renamed onto it; nothing when the
    folder cannot be written (the caller then builds again the next time)."""
    if library_versions() is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except OSError:
        pass
    finally:
        Path(tmp).unlink(missing_ok=True)
