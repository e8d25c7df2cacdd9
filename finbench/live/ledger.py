"""The live mode's ledger (docs/live.md): an append-only, hash-chained JSON-lines file,
``ledger.jsonl``. Every entry holds its place (``seq``), the previous entry's hash
(``prev``; the first: 64 zeros), its ``kind`` and fields, and its own ``hash``: the SHA-256
of its canonical JSON without ``hash``. Changing, dropping, inserting or reordering any line
breaks the chain at that line, which :func:`chain_problems` names.

Kinds: ``commit`` (a sealed answer: task, model, ``commitment``), ``seal`` (the chain's head
timestamped by a TSA: its token, the horizon's deadline), ``missed`` (a horizon the live
process did not answer in time), ``reveal`` (after the target: each answer, its receipt and
its nonce, so that anyone can recompute the commitment)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

LEDGER = "ledger.jsonl"
GENESIS = "0" * 64


def canonical(value) -> bytes:
    """The canonical JSON bytes of ``value``: keys sorted, no white space, UTF-8, no NaN."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode()


def entry_hash(entry: dict) -> str:
    """The SHA-256 (hex) of an entry's canonical JSON without its ``hash``."""
    return hashlib.sha256(canonical({k: v for k, v in entry.items() if k != "hash"})).hexdigest()


def commitment(payload: dict, nonce: str) -> str:
    """``SHA-256(canonical JSON of payload || nonce)``, the nonce 16 bytes given as hex: the
    answer space is small (a probability to a few digits), so without the nonce a commitment
    could be opened by trying every answer.

    >>> commitment({"p_up": 0.5}, "00" * 16)[:16]
    'dd00fe1e51d0927c'
    """
    return hashlib.sha256(canonical(payload) + bytes.fromhex(nonce)).hexdigest()


class Ledger:
    """The ledger of a live run directory (``folder/ledger.jsonl``). One object reads the file
    once and then only what was appended since (a season's ledger grows by every answer)."""

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / LEDGER
        self._entries: list[dict] = []
        self._offset = 0  # the bytes of whole lines read

    def entries(self) -> list[dict]:
        """Every whole entry, in order. A last line without its newline (an append cut off by
        a kill) is not an entry: the next append replaces it."""
        return list(self.since(0))

    def since(self, seq: int) -> list[dict]:
        """The entries from place ``seq`` on (the file read from where it was last read)."""
        self._refresh()
        return self._entries[seq:]

    def _refresh(self) -> None:
        if not self.path.is_file():
            self._entries, self._offset = [], 0
            return
        size = self.path.stat().st_size
        if size < self._offset:  # the file was replaced: read it again
            self._entries, self._offset = [], 0
        with open(self.path, "rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        whole = data[:data.rfind(b"\n") + 1]
        self._entries += [json.loads(line) for line in whole.splitlines() if line.strip()]
        self._offset += len(whole)

    def head(self) -> str:
        """The hash of the last entry (the chain's head), :data:`GENESIS` for none."""
        self._refresh()
        return self._entries[-1]["hash"] if self._entries else GENESIS

    def append(self, records: list[dict]) -> list[dict]:
        """Append entries (each a ``kind`` and its fields) chained after the head, written and
        fsynced together; returns them as written."""
        self._refresh()
        prev = self._entries[-1]["hash"] if self._entries else GENESIS
        seq = len(self._entries)
        out = []
        for record in records:
            entry = {"seq": seq, "prev": prev, **record}
            entry["hash"] = entry_hash(entry)
            out.append(entry)
            prev, seq = entry["hash"], seq + 1
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = b"".join(canonical(e) + b"\n" for e in out)
        self.path.touch()
        with open(self.path, "r+b") as fh:
            fh.seek(self._offset)  # a torn last line is written over
            fh.truncate()
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        self._entries += out
        self._offset += len(text)
        return out


def chain_problems(path: str | Path) -> list[str]:
    """The first break of a ledger file's chain, named by its line (empty: the chain holds):
    a line that is not a JSON object, a ``seq`` out of place, a ``prev`` that is not the line
    before's hash, a ``hash`` that is not the line's own."""
    path = Path(path)
    prev = GENESIS
    for number, line in enumerate(path.read_bytes().split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as exc:
            return [f"{path.name}: line {number}: not JSON ({exc})"]
        if not isinstance(entry, dict):
            return [f"{path.name}: line {number}: not a JSON object"]
        if entry.get("seq") != number - 1:
            return [f"{path.name}: line {number}: seq {entry.get('seq')!r} is not "
                    f"{number - 1} (a line dropped, added or moved)"]
        if entry.get("prev") != prev:
            return [f"{path.name}: line {number}: prev is not the hash of line {number - 1}"]
        if entry.get("hash") != entry_hash(entry):
            return [f"{path.name}: line {number}: its hash is not its content's (the line "
                    "was changed)"]
        prev = entry["hash"]
    return []
