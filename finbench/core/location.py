"""Where a store or a run directory lives: a local path, or a folder on object storage given as
a URI (``s3://bucket/prefix``, or any scheme pyarrow's filesystems know: ``gs://``, ``hdfs://``).

Object storage is reached through pyarrow's filesystems, and credentials come from the
environment only (for S3: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``,
and ``AWS_ENDPOINT_URL`` for an S3-compatible service other than AWS), never from a config file
or a command line, so none of them lands in a run's manifest. A URI here is a folder: its
files are keys under the prefix.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.fs as pafs

from finbench.core.errors import FinbenchError

_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
BLOCK = 1 << 23  # bytes copied at a time between filesystems


class LocationError(FinbenchError):
    """A location that cannot be reached or is not what was asked for."""


def is_uri(where: str | Path) -> bool:
    """Whether ``where`` names object storage (a URI with a scheme other than ``file``)."""
    text = str(where)
    return bool(_SCHEME.match(text)) and not text.lower().startswith("file://")


def local_path(where: str | Path) -> Path:
    """``where`` as a local Path (``file://`` stripped)."""
    text = str(where)
    return Path(text[len("file://"):] if text.lower().startswith("file://") else text)


def filesystem(where: str | Path) -> tuple[pafs.FileSystem, str]:
    """The filesystem and the path in it of ``where`` (a local path or a URI)."""
    if not is_uri(where):
        return pafs.LocalFileSystem(), str(local_path(where).absolute())
    try:
        fs, path = pafs.FileSystem.from_uri(str(where))
    except (OSError, ValueError) as exc:
        raise LocationError(f"{where}: cannot open this location ({exc}); credentials and an "
                            "endpoint come from the environment (for S3: AWS_ACCESS_KEY_ID, "
                            "AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL)") from None
    if not path.strip("/"):
        raise LocationError(f"{where}: names no bucket; a store or run lives in a folder of "
                            "one (s3://BUCKET/PREFIX)")
    return fs, path.rstrip("/")


def join(root: str, rel: str) -> str:
    return f"{root}/{rel}" if rel else root


def is_file(fs: pafs.FileSystem, path: str) -> bool:
    return fs.get_file_info(path).type == pafs.FileType.File


def files_under(fs: pafs.FileSystem, root: str) -> dict[str, int]:
    """Every file below ``root`` (relative path -> size); empty when ``root`` is absent."""
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    return {i.path[len(root) + 1:]: i.size for i in infos if i.type == pafs.FileType.File}


def read_bytes(fs: pafs.FileSystem, path: str) -> bytes:
    """A file's bytes, read whole: from object storage one ranged GET (after the size's
    HEAD); a stream would fetch it in several."""
    with fs.open_input_file(path) as fh:
        return fh.read()


def read_file(where: str | Path, rel: str) -> bytes:
    """The bytes of the file ``rel`` in the folder ``where`` (a local path or a URI)."""
    fs, root = filesystem(where)
    return read_bytes(fs, join(root, rel))


def copy_file(src_fs: pafs.FileSystem, src: str, dst_fs: pafs.FileSystem, dst: str) -> None:
    """One file's bytes from ``src`` to ``dst`` (on object storage the new object appears
    whole, when the stream closes; a local target is written under a temporary name and renamed
    so a reader never sees half of it)."""
    local = isinstance(dst_fs, pafs.LocalFileSystem)
    target = dst + ".tmp" if local else dst
    if local:
        Path(dst).parent.mkdir(parents=True, exist_ok=True)
    with src_fs.open_input_stream(src) as inp, dst_fs.open_output_stream(target) as out:
        while block := inp.read(BLOCK):
            out.write(block)
    if local:
        Path(target).replace(dst)


def copy_tree(src: str | Path, dst: str | Path, *, skip=lambda rel: False,
              others: bool = True) -> list[str]:
    """Copy every file below ``src`` (but those ``skip`` names) to the same relative path below
    ``dst`` (either may be a URI); returns the relative paths copied. Files at ``dst`` that
    ``src`` lacks are left with ``others``, else refused before anything is copied (a store
    or run copied over another would mix the two)."""
    src_fs, src_root = filesystem(src)
    dst_fs, dst_root = filesystem(dst)
    inside = not is_uri(src) and not is_uri(dst) and (
        Path(src_root).resolve() in (Path(dst_root).resolve(), *Path(dst_root).resolve().parents))
    if inside:
        raise LocationError(f"{dst}: is {src} or inside it; copy to a folder of its own")
    try:  # object storage unreachable, or refusing, midway: one line naming both places
        names = sorted(r for r in files_under(src_fs, src_root) if not skip(r))
        if not names and src_fs.get_file_info(src_root).type != pafs.FileType.Directory:
            raise LocationError(f"{src}: nothing there to copy")
        extra = [] if others else sorted(set(r for r in files_under(dst_fs, dst_root)
                                             if not skip(r)) - set(names))
        if extra:
            raise LocationError(f"{dst}: holds {len(extra)} file(s) that {src} lacks "
                                f"({', '.join(extra[:3])}{', ...' if len(extra) > 3 else ''});"
                                " copying there would mix the two: give an empty or new "
                                "folder, or remove them")
        for rel in names:
            copy_file(src_fs, join(src_root, rel), dst_fs, join(dst_root, rel))
    except OSError as exc:
        raise LocationError(f"copying {src} to {dst}: {exc}") from None
    return names
