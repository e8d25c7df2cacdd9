"""Parquet files joined by copying their row groups' bytes: no value is decoded or encoded.

A Parquet file is ``PAR1``, its row groups' column chunks, a footer (Thrift compact
``FileMetaData``), the footer's length and ``PAR1``. :class:`RowGroupJoiner` writes one file
holding the row groups of several files of one schema, in order: it copies each file's column
chunks and writes a footer listing every row group, its offsets moved to where the bytes now
lie. What it copies is what Arrow wrote, so the joined file reads back as the files' rows one
after the other, and its bytes depend on the files' bytes only.

The footer is read and written by a small Thrift compact-protocol codec that keeps every field
as it was (unknown ones too) and changes only the offsets it knows. A file it cannot join
exactly (another schema, page indexes or bloom filters, which lie outside the row groups,
encryption, chunks not filling the space between magic and footer) is refused with
:class:`JoinError`, so the caller encodes its rows instead; it never writes a file that lies.
"""

from __future__ import annotations

import errno
import hashlib
import os
import struct
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

MAGIC = b"PAR1"

# Thrift compact protocol types
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = (
    range(13))
_UUID = 13

# parquet.thrift field ids
_FILE_NUM_ROWS, _FILE_ROW_GROUPS = 3, 4
_FILE_ENCRYPTION = (8, 9)  # encryption_algorithm, footer_signing_key_metadata
_RG_COLUMNS, _RG_NUM_ROWS, _RG_FILE_OFFSET, _RG_ORDINAL = 1, 3, 5, 7
_CC_FILE_PATH, _CC_FILE_OFFSET, _CC_META = 1, 2, 3
_CC_OUTSIDE = (4, 5, 6, 7, 8, 9)  # page index offsets and lengths, encryption
_CM_TOTAL_COMPRESSED, _CM_DATA_PAGE, _CM_INDEX_PAGE, _CM_DICTIONARY_PAGE = 7, 9, 10, 11
_CM_OUTSIDE = (14, 15)  # bloom filter offset and length
_CM_PAGES = (_CM_DATA_PAGE, _CM_INDEX_PAGE, _CM_DICTIONARY_PAGE)


class JoinError(ValueError):
    """A file whose row groups cannot be copied into the joined file exactly."""


class Struct:
    """A Thrift struct as read: its fields ``(id, type, value)`` in the order written."""

    __slots__ = ("fields",)

    def __init__(self, fields: list[list]) -> None:
        self.fields = fields

    def get(self, fid: int, default=None):
        for f in self.fields:
            if f[0] == fid:
                return f[2]
        return default

    def has(self, fid: int) -> bool:
        return any(f[0] == fid for f in self.fields)

    def set(self, fid: int, value) -> None:
        for f in self.fields:
            if f[0] == fid:
                f[2] = value
                return
        raise KeyError(fid)

    def copy(self) -> Struct:
        return Struct([[fid, kind, _copied(kind, value)] for fid, kind, value in self.fields])


def _copied(kind: int, value):
    if kind == _STRUCT:
        return value.copy()
    if kind in (_LIST, _SET):
        elem, items = value
        return (elem, [_copied(elem, v) for v in items])
    return value


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def byte(self) -> int:
        b = self.data[self.at]
        self.at += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, kind: int):
        if kind in (_TRUE, _FALSE):  # a bool inside a list: one byte
            return self.byte() == _TRUE
        if kind == _BYTE:
            return self.byte()
        if kind in (_I16, _I32, _I64):
            return self.zigzag()
        if kind == _DOUBLE:
            self.at += 8
            return self.data[self.at - 8:self.at]
        if kind == _BINARY:
            n = self.varint()
            self.at += n
            return self.data[self.at - n:self.at]
        if kind == _UUID:
            self.at += 16
            return self.data[self.at - 16:self.at]
        if kind in (_LIST, _SET):
            head = self.byte()
            size, elem = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            return (elem, [self.value(elem) for _ in range(size)])
        if kind == _MAP:
            size = self.varint()
            types = self.byte() if size else 0
            k, v = types >> 4, types & 0x0F
            return (k, v, [(self.value(k), self.value(v)) for _ in range(size)])
        if kind == _STRUCT:
            return self.struct()
        raise JoinError(f"Thrift type {kind} unknown")

    def struct(self) -> Struct:
        fields, last = [], 0
        while True:
            head = self.byte()
            if head == _STOP:
                return Struct(fields)
            delta, kind = head >> 4, head & 0x0F
            fid = last + delta if delta else self.zigzag()
            if kind in (_TRUE, _FALSE):  # a bool field: its value is its type
                fields.append([fid, kind, kind == _TRUE])
            else:
                fields.append([fid, kind, self.value(kind)])
            last = fid


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def varint(self, n: int) -> None:
        while n > 0x7F:
            self.out.append((n & 0x7F) | 0x80)
            n >>= 7
        self.out.append(n)

    def zigzag(self, n: int) -> None:
        self.varint((n << 1) ^ (n >> 63))

    def value(self, kind: int, value) -> None:
        if kind in (_TRUE, _FALSE):
            self.out.append(_TRUE if value else _FALSE)
        elif kind == _BYTE:
            self.out.append(value)
        elif kind in (_I16, _I32, _I64):
            self.zigzag(value)
        elif kind in (_DOUBLE, _UUID):
            self.out += value
        elif kind == _BINARY:
            self.varint(len(value))
            self.out += value
        elif kind in (_LIST, _SET):
            self.items(*value)
        elif kind == _MAP:
            self.pairs(*value)
        elif kind == _STRUCT:
            self.struct(value)
        else:
            raise JoinError(f"Thrift type {kind} unknown")

    def items(self, elem: int, items: list) -> None:
        if len(items) < 15:
            self.out.append(len(items) << 4 | elem)
        else:
            self.out.append(0xF0 | elem)
            self.varint(len(items))
        for item in items:
            self.value(elem, item)

    def pairs(self, k: int, v: int, items: list) -> None:
        self.varint(len(items))
        if items:
            self.out.append(k << 4 | v)
        for key, item in items:
            self.value(k, key)
            self.value(v, item)

    def struct(self, struct: Struct) -> None:
        last = 0
        for fid, kind, value in struct.fields:
            head = (_TRUE if value else _FALSE) if kind in (_TRUE, _FALSE) else kind
            if 0 < fid - last <= 15:
                self.out.append((fid - last) << 4 | head)
            else:
                self.out.append(head)
                self.zigzag(fid)
            if kind not in (_TRUE, _FALSE):
                self.value(kind, value)
            last = fid
        self.out.append(_STOP)


def decode_footer(data: bytes) -> Struct:
    """The ``FileMetaData`` of a footer's bytes."""
    try:
        reader = _Reader(data)
        meta = reader.struct()
    except IndexError:
        raise JoinError("the footer ends inside a field") from None
    if reader.at != len(data):
        raise JoinError(f"the footer holds {len(data) - reader.at} bytes after its end")
    return meta


def encode_footer(meta: Struct) -> bytes:
    writer = _Writer()
    writer.struct(meta)
    return bytes(writer.out)


def split_file(data: bytes | memoryview, name: str = "file") -> tuple[memoryview, Struct]:
    """(the bytes of a Parquet file's row groups, its footer decoded). The row groups' bytes
    are those between the leading magic and the footer; a file whose column chunks do not
    fill exactly that space (page indexes, bloom filters) is a :class:`JoinError`."""
    view = memoryview(data)
    end, meta = _layout(len(view), lambda start, stop: view[start:stop], name)
    return view[4:end], meta


@dataclass(frozen=True)
class FileBody:
    """A Parquet file's row groups' bytes left on disk: ``[start, end)`` of ``path``."""

    path: Path
    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start


def split_path(path: str | Path) -> tuple[FileBody, Struct]:
    """:func:`split_file` of the Parquet file at ``path``, reading its magic and footer alone."""
    with open(path, "rb") as fh:
        def read(start: int, stop: int) -> bytes:
            fh.seek(start)
            return fh.read(stop - start)

        end, meta = _layout(os.fstat(fh.fileno()).st_size, read, str(path))
    return FileBody(Path(path), 4, end), meta


def _layout(size: int, read, name: str) -> tuple[int, Struct]:
    """(where the footer of a Parquet file of ``size`` bytes begins, its footer decoded), its
    bytes read by ``read(start, stop)``; checked as :func:`split_file` says."""
    if size < 12 or read(0, 4) != MAGIC or read(size - 4, size) != MAGIC:
        raise JoinError(f"{name}: not a Parquet file (no PAR1 at both ends)")
    (length,) = struct.unpack("<I", read(size - 8, size - 4))
    end = size - 8 - length
    if end < 4:
        raise JoinError(f"{name}: its footer length {length} is past the file's start")
    meta = decode_footer(bytes(read(end, size - 8)))
    if any(meta.has(f) for f in _FILE_ENCRYPTION):
        raise JoinError(f"{name}: encrypted")
    at = 4
    for group in _row_groups(meta):
        for chunk in group.get(_RG_COLUMNS, (0, []))[1]:
            if any(chunk.has(f) for f in _CC_OUTSIDE) or chunk.get(_CC_FILE_PATH):
                raise JoinError(f"{name}: a column chunk with a page index, encryption or "
                                "data in another file")
            column = chunk.get(_CC_META)
            if column is None or any(column.has(f) for f in _CM_OUTSIDE):
                raise JoinError(f"{name}: a column chunk without metadata or with a bloom "
                                "filter")
            # where its first page lies (0 is no page: the magic lies there; an empty row
            # group's chunk has a dictionary page and data_page_offset 0)
            start = min((column.get(f) for f in _CM_PAGES if column.get(f, 0) > 0),
                        default=at if column.get(_CM_TOTAL_COMPRESSED) == 0 else None)
            if start != at:
                raise JoinError(f"{name}: a column chunk starts at {start}, not right after "
                                f"the one before ({at})")
            at = start + column.get(_CM_TOTAL_COMPRESSED)
    if at != end:
        raise JoinError(f"{name}: its column chunks end at {at}, not at its footer ({end})")
    return end, meta


def _row_groups(meta: Struct) -> list[Struct]:
    return meta.get(_FILE_ROW_GROUPS, (_STRUCT, []))[1]


def _group_size(group: Struct) -> int:
    """The bytes of a row group's column chunks (which lie one after the other)."""
    return sum(chunk.get(_CC_META).get(_CM_TOTAL_COMPRESSED)
               for chunk in group.get(_RG_COLUMNS, (0, []))[1])


def row_group_rows(meta: Struct) -> list[int]:
    """The rows of each row group a decoded footer lists."""
    return [group.get(_RG_NUM_ROWS) for group in _row_groups(meta)]


def _moved(group: Struct, shift: int, ordinal: int) -> Struct:
    """A row group's metadata with every offset into the file moved by ``shift`` bytes."""
    group = group.copy()
    if group.has(_RG_FILE_OFFSET):
        group.set(_RG_FILE_OFFSET, group.get(_RG_FILE_OFFSET) + shift)
    if group.has(_RG_ORDINAL):
        group.set(_RG_ORDINAL, ordinal)
    for chunk in group.get(_RG_COLUMNS, (0, []))[1]:
        if chunk.get(_CC_FILE_OFFSET):  # 0 is written for "not given": kept
            chunk.set(_CC_FILE_OFFSET, chunk.get(_CC_FILE_OFFSET) + shift)
        column = chunk.get(_CC_META)
        for fid in _CM_PAGES:
            if column.get(fid, 0) > 0:  # 0: no such page, kept
                column.set(fid, column.get(fid) + shift)
    return group


def row_groups_are_files(path: str | Path, files: list[str | Path]) -> bool:
    """Whether the Parquet file at ``path`` is ``files`` (each of one row group) joined as
    :class:`RowGroupJoiner` joins them, in some order, each once: every row group of it the
    bytes of one file's row group, its metadata that row group's moved where it lies, the
    schema and metadata apart from rows the same. Then it holds exactly those files' rows,
    each one's values as that file has them, and none else; found from footers and bytes,
    no value decoded. False where that cannot be shown (files of several row groups, a file
    it cannot split exactly, any byte or field that differs)."""
    try:
        body, meta = split_path(path)
        schema = _apart_from_rows(meta)
        by_bytes: dict[bytes, list[Struct]] = {}
        for name in files:
            part, part_meta = split_path(name)
            groups = _row_groups(part_meta)
            if len(groups) != 1 or _apart_from_rows(part_meta) != schema:
                return False
            with open(name, "rb") as fh:
                fh.seek(part.start)
                key = hashlib.sha256(fh.read(len(part))).digest()
            by_bytes.setdefault(key, []).append(groups[0])
        groups = _row_groups(meta)
        if len(groups) != len(files):
            return False
        at = len(MAGIC)
        with open(path, "rb") as fh:
            for ordinal, group in enumerate(groups):
                size = _group_size(group)
                fh.seek(at)
                found = by_bytes.get(hashlib.sha256(fh.read(size)).digest())
                if not found:
                    return False
                # the file's row group as the joiner lists it here (its bytes began after
                # the file's magic): the same fields, offsets and all
                if encode_footer(_moved(found.pop(), at - len(MAGIC), ordinal)) != \
                        encode_footer(group):
                    return False
                at += size
        return at == body.end
    except (JoinError, OSError):
        return False


def _apart_from_rows(meta: Struct) -> bytes:
    """A ``FileMetaData``'s fields but its rows and row groups (the schema, key-value metadata
    such as Arrow's schema, the writer, column orders), encoded: equal for files that can be
    joined."""
    return encode_footer(Struct([f for f in meta.fields
                                 if f[0] not in (_FILE_NUM_ROWS, _FILE_ROW_GROUPS)]))


class RowGroupJoiner:
    """Writes ``path``: the row groups of the Parquet files given to :meth:`add`, in order,
    their bytes copied as they are (``open`` for writing: the caller names a temporary file
    and renames it). ``template``: a Parquet file of the schema (rows or none), whose footer
    gives the joined file's schema and metadata; every file added must have the same.
    :meth:`close` writes the footer."""

    def __init__(self, path: str | Path, template: bytes | memoryview) -> None:
        self.path = Path(path)
        self.head = split_file(template, "the template")[1]
        self._schema = _apart_from_rows(self.head)
        self.fh = open(self.path, "wb")
        self.fh.write(MAGIC)
        self.at = len(MAGIC)
        self.groups: list[Struct] = []
        self.rows = 0

    def check(self, data: bytes | memoryview | str | Path, name: str = "file"
              ) -> tuple[memoryview | FileBody, Struct]:
        """:func:`split_file` of ``data`` (bytes; or a path, read by :func:`split_path`),
        refused (:class:`JoinError`) unless its schema and metadata are the template's;
        nothing is written."""
        if isinstance(data, str | Path):
            body, meta = split_path(data)
            name = str(data)
        else:
            body, meta = split_file(data, name)
        if _apart_from_rows(meta) != self._schema:
            raise JoinError(f"{name}: its schema or metadata differ from the template's")
        return body, meta

    def add(self, data: bytes | memoryview, name: str = "file") -> None:
        """Append the row groups of a whole Parquet file given as bytes."""
        body, meta = self.check(data, name)
        self.add_checked(body, meta)

    def add_checked(self, body: memoryview | FileBody, meta: Struct) -> None:
        """Append what :meth:`check` returned (bytes on disk copied by the system, never
        through this process: :func:`copy_range`)."""
        shift = self.at - len(MAGIC)
        for group in _row_groups(meta):
            self.groups.append(_moved(group, shift, len(self.groups)))
        self.rows += meta.get(_FILE_NUM_ROWS, 0)
        self._copy(body, 0, len(body))

    def add_groups(self, body: memoryview | FileBody, meta: Struct, groups: list[int]) -> None:
        """Append the row groups numbered ``groups`` (in that order) of what :meth:`check`
        returned, each group's bytes copied as :meth:`add_checked` copies a file's."""
        listed = _row_groups(meta)
        starts = list(accumulate((_group_size(g) for g in listed), initial=0))
        for g in groups:
            group = listed[g]
            # its bytes lie at starts[g] of the body, which begins after the file's magic
            self.groups.append(_moved(group, self.at - len(MAGIC) - starts[g], len(self.groups)))
            self.rows += group.get(_RG_NUM_ROWS)
            self._copy(body, starts[g], starts[g + 1] - starts[g])

    def _copy(self, body: memoryview | FileBody, start: int, size: int) -> None:
        """``size`` bytes of ``body`` from ``start`` written at the end of the file."""
        if isinstance(body, FileBody):
            self.fh.flush()
            with open(body.path, "rb") as src:
                copy_range(src.fileno(), self.fh.fileno(), body.start + start, size)
            self.fh.seek(self.at + size)  # where the copy left the file
        else:
            self.fh.write(body[start:start + size])
        self.at += size

    def add_file(self, path: str | Path) -> None:
        """Append the row groups of the Parquet file at ``path``."""
        self.add_checked(*self.check(path))

    def close(self, *, synced: bool = True) -> None:
        """Write the footer and close the file, fsynced (``synced=False``: the caller syncs
        it later)."""
        try:
            meta = self.head.copy()
            meta.set(_FILE_NUM_ROWS, self.rows)
            meta.set(_FILE_ROW_GROUPS, (_STRUCT, self.groups))
            footer = encode_footer(meta)
            self.fh.write(footer + struct.pack("<I", len(footer)) + MAGIC)
            self.fh.flush()
            if synced:
                os.fsync(self.fh.fileno())
        finally:
            self.fh.close()

    def abort(self) -> None:
        """Close without a footer (the caller removes the file)."""
        self.fh.close()


# what copy_file_range says where the system cannot copy between these two files
_NO_RANGE_COPY = {errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL, errno.EBADF}


def copy_range(src: int, dst: int, start: int, size: int) -> None:
    """``size`` bytes of file descriptor ``src`` from offset ``start`` written at ``dst``'s
    position: by ``os.copy_file_range`` (Linux: in the kernel, no copy through this
    process), else, where it is missing or cannot copy between these files, read and
    written."""
    done = 0
    copy = getattr(os, "copy_file_range", None)
    while copy is not None and done < size:
        try:
            n = copy(src, dst, size - done, start + done)
        except OSError as exc:
            if done or exc.errno not in _NO_RANGE_COPY:
                raise
            break
        if n == 0:
            raise OSError(errno.EIO, f"the file ended {size - done} bytes early")
        done += n
    while done < size:
        chunk = os.pread(src, min(size - done, 1 << 24), start + done)
        if not chunk:
            raise OSError(errno.EIO, f"the file ended {size - done} bytes early")
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst, view):]
        done += len(chunk)
