"""SHA-256 hex digests of many short texts at once (the receipts of baseline rows).

``hashlib`` holds Python's lock while it hashes a short text, so no thread can share the
work: :class:`Sha256Helper` hashes in a helper process instead, while the caller goes on.
The helper is a bare ``python -I -S`` running the few lines of :data:`_HELPER` (the standard
library's hashlib alone: it starts in milliseconds, reads nothing of the project), fed
through a pipe. Either way the digests are ``hashlib.sha256(text).hexdigest()`` of each text,
byte for byte: :func:`sha256_hex` is the same in this process.
"""

from __future__ import annotations

import hashlib
import struct
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from finbench.core.errors import RunError

HEX = 64  # characters of a SHA-256 hex digest

# The helper: requests of (count, bytes) and the texts' int32 Arrow offsets and data; each
# answered with the hex digests of the texts, one after the other. It ignores Ctrl-C (the
# caller, signalled with it, ends it by closing the pipe) and ends when the pipe closes.
_HELPER = r"""
import binascii, hashlib, signal, struct, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
read, write, sha = sys.stdin.buffer.read, sys.stdout.buffer.write, hashlib.sha256
while True:
    head = read(16)
    if len(head) < 16:
        break
    n, size = struct.unpack("<QQ", head)
    offsets = memoryview(read(4 * (n + 1))).cast("i").tolist()
    data = memoryview(read(size))
    first = offsets[0]
    write(binascii.hexlify(b"".join([sha(data[a - first:b - first]).digest()
                                     for a, b in zip(offsets, offsets[1:])])))
    sys.stdout.buffer.flush()
"""


def sha256_hex(texts: pa.Array) -> pa.Array:
    """The SHA-256 hex digest of each text (an Arrow string or binary array, no nulls), in
    this process."""
    sha = hashlib.sha256
    return pa.array([sha(b).hexdigest() for b in texts.cast(pa.binary()).to_pylist()],
                    pa.string())


def _hex_array(hexed: bytes, n: int) -> pa.Array:
    offsets = np.arange(0, HEX * n + 1, HEX, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(hexed)])


def _parts(texts: pa.Array) -> tuple[int, pa.Buffer, pa.Buffer | bytes]:
    """(count, int32 offsets, data) of a string array, as the helper reads them: slices of the
    array's own buffers, not copies."""
    texts = texts.cast(pa.string())
    if texts.offset or texts.null_count:
        texts = pa.concat_arrays([texts.fill_null("")])
    n = len(texts)
    _, offsets, data = texts.buffers()
    first, last = (int(v) for v in np.frombuffer(offsets, np.int32, n + 1)[[0, -1]])
    return n, offsets.slice(0, 4 * (n + 1)), (
        data.slice(first, last - first) if data is not None else b"")


class Sha256Helper:
    """A helper process hashing the texts handed to :meth:`submit`, in the order handed,
    while the caller works on; a context manager (the process ends on leaving it)."""

    def __init__(self) -> None:
        """Start the helper (an OSError where no process can be started)."""
        if not sys.executable:
            raise OSError("no Python executable to start a helper process with")
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _HELPER],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     bufsize=0)
        # one thread feeds the pipe and reads the answers (the lock is let go while it waits)
        self.io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sha256")

    def submit(self, texts: pa.Array) -> Future:
        """The hex digests of ``texts`` (:func:`sha256_hex`), to come."""
        return self.io.submit(self._hash, texts)

    def _hash(self, texts: pa.Array) -> pa.Array:
        n, offsets, data = _parts(texts)
        try:
            for piece in (struct.pack("<QQ", n, len(data)), offsets, data):
                _write(self.proc.stdin, piece)
            hexed = _read(self.proc.stdout, HEX * n)
        except (BrokenPipeError, EOFError):
            raise RunError(f"the hashing helper process ended (exit code "
                           f"{self.proc.poll()}): receipts cannot be made") from None
        return _hex_array(hexed, n)

    def close(self) -> None:
        self.io.shutdown(wait=True)
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()

    def __enter__(self) -> Sha256Helper:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _write(stream, data) -> None:
    """All of ``data`` to an unbuffered pipe (a write there may take part of it)."""
    view = memoryview(data).cast("B")
    while len(view):
        view = view[stream.write(view):]


def _read(stream, size: int) -> bytes:
    chunks, got = [], 0
    while got < size:
        chunk = stream.read(size - got)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def digests(texts: pa.Array, helper: Sha256Helper | None) -> Future:
    """The hex digests of ``texts``: from ``helper`` (to come) or made here (done)."""
    if helper is not None:
        return helper.submit(texts)
    done: Future = Future()
    done.set_result(sha256_hex(texts))
    return done
