"""A change to a store on a local disk (bars, headlines, an event store's files) made whole
or not at all, and by one process at a time.

A change writes new files and then the manifest listing them with their hashes. Written in
that order and no more, a process killed between the first file moved into place and the
manifest left a store whose files the manifest did not describe: a run read the new bars
under the old snapshot hash. So a change is made in three steps:

1. each new file is written under a temporary name beside its own (``NAME.tmp``), hashed
   and synced (a machine losing power after step 2 finds them whole); a process killed here
   leaves the store as it was (the next change writes over them);
2. :data:`COMMIT` is written (atomically, synced): the manifest to be, the files to move
   into place and the files to remove. From here the change is decided;
3. the files are moved into place and removed, the manifest written, :data:`COMMIT` removed.

A process killed during step 3 leaves :data:`COMMIT`; the next process to open the store
finishes the change from it (:func:`finish`) before it reads anything: every move whose
temporary file is still there is made (the others were), every removal, then the manifest.
What the change writes depends on :data:`COMMIT` alone, so finishing it twice writes the
same store.

One process changes a store at a time: each change holds an exclusive ``flock`` on the
store's ``.finbench.lock`` (:func:`store_lock`: :mod:`finbench.core.folder_lock`, as a run
directory's), from reading the manifest it merges into to writing it; a second
one fails at once naming the holder.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from finbench.core.errors import StoreError
from finbench.core.folder_lock import FolderLock
from finbench.core.location import is_uri
from finbench.core.outputs import sync_file, write_json

COMMIT = "commit.json"  # a change decided and not yet finished (in the store's folder)
SYNCERS = 8  # the new files' fsyncs made at once (the file system batches them)
FORMAT = "finbench-store-commit"


def commit(root: Path, manifest_name: str, manifest: dict, *,
           moves: list[tuple[Path, Path]], removals: list[Path]) -> None:
    """Make a change whose new files are written and hashed: ``moves`` (temporary file, its
    place) below ``root``, ``removals`` (files below ``root`` to remove), then ``manifest``
    written to ``root / manifest_name``. The caller holds :func:`store_lock`."""
    plan = {"format": FORMAT, "manifest_name": manifest_name, "manifest": manifest,
            "moves": [[_rel(root, tmp), _rel(root, final)] for tmp, final in moves],
            "removals": [_rel(root, path) for path in removals]}
    with ThreadPoolExecutor(max_workers=SYNCERS) as pool:  # fsyncs let go of the GIL
        list(pool.map(sync_file, [tmp for tmp, _ in moves]))
    write_json(root / COMMIT, plan)
    sync_file(root / COMMIT)
    _sync_folder(root)
    _carry_out(root, plan)


def finish(root: Path) -> bool:
    """Finish the change :data:`COMMIT` records, if there is one (the caller holds
    :func:`store_lock`); whether there was one."""
    path = root / COMMIT
    if not path.is_file():
        return False
    try:
        plan = json.loads(path.read_text())
        if plan.get("format") != FORMAT:
            raise ValueError(f"format is not {FORMAT!r}")
        for tmp, final in plan["moves"]:
            _inside(root, tmp), _inside(root, final)
        for rel in plan["removals"]:
            _inside(root, rel)
        _inside(root, plan["manifest_name"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"{path}: cannot be read ({exc}); it records a change to the store "
                         "that did not finish: restore the store from a copy") from None
    _carry_out(root, plan)
    return True


def finish_unless_busy(root: Path) -> bool:
    """:func:`finish` a change left by a process that ended during it; nothing when none is
    left or another process is changing the store now (it finishes its own). Whether one was
    finished."""
    if not (root / COMMIT).is_file():
        return False
    try:
        with store_lock(root, "finishing a change to the store"):
            return finish(root)
    except StoreError as exc:
        if "in use by" in str(exc):  # a live change: it writes the manifest itself
            return False
        raise
    except OSError as exc:  # e.g. a store on a read-only disk: its files are half changed
        raise StoreError(f"{root}: a change to the store was left unfinished ({COMMIT}) and "
                         f"cannot be finished here ({exc}); open the store once where it can "
                         "be written, which finishes it") from None


def unfinished(folder: str | Path) -> str | None:
    """Why a local store folder cannot be copied now: a change to it not finished (one a
    killed process left is finished here first), else None."""
    if is_uri(folder) or not Path(folder).is_dir():
        return None
    root = Path(folder)
    finish_unless_busy(root)
    if (root / COMMIT).is_file():
        return (f"{root}: a change to the store is being made ({COMMIT}); copy it when the "
                "process making it ends")
    return None


@contextmanager
def change_lock(root: Path, command: str):
    """Hold the store's lock for a change, a change a killed process left finished first."""
    with store_lock(root, command):
        finish(root)
        yield


class StoreLock(FolderLock):
    what = "store"
    error = StoreError


def store_lock(root: Path, command: str) -> StoreLock:
    """The store's exclusive lock, to hold (a second process fails at once, naming the
    holder)."""
    return StoreLock(root, command=command)


def _carry_out(root: Path, plan: dict) -> None:
    for tmp, final in plan["moves"]:
        if (root / tmp).exists():  # else moved before the process making it ended
            os.replace(root / tmp, root / final)
    for rel in plan["removals"]:
        (root / rel).unlink(missing_ok=True)
    write_json(root / plan["manifest_name"], plan["manifest"])
    (root / COMMIT).unlink()


def _rel(root: Path, path: Path) -> str:
    return Path(path).relative_to(root).as_posix()


def _inside(root: Path, rel) -> None:
    """A path of :data:`COMMIT`: relative, below the store's folder."""
    if not isinstance(rel, str) or Path(rel).is_absolute() or ".." in Path(rel).parts:
        raise ValueError(f"{rel!r} is not a path inside the store")


def _sync_folder(path: Path) -> None:
    """The folder's entries (the commit file's name) on disk, where the system allows."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
