"""The live mode's ledger and seals: the hash chain by hand, every kind of edit named at its
line, commitments by hand, a torn last line written over; RFC 3161 tokens from the tests' own
authority (its own CA) checked by the client, and refused for another message, another root
or a flipped byte."""

import hashlib
import json

import pytest

from finbench.live.ledger import GENESIS, Ledger, canonical, chain_problems, commitment, entry_hash
from finbench.live.tsa import TsaError, check_token, request_token
from tests.tsa_server import TimestampAuthority


@pytest.fixture(scope="module")
def tsa():
    authority = TimestampAuthority()
    yield authority
    authority.close()


def test_the_chain_by_hand(tmp_path):
    ledger = Ledger(tmp_path)
    first, second = ledger.append([{"kind": "commit", "task_id": "A", "commitment": "c1"},
                                   {"kind": "commit", "task_id": "B", "commitment": "c2"}])
    body = {"seq": 0, "prev": GENESIS, "kind": "commit", "task_id": "A", "commitment": "c1"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    assert first["hash"] == hashlib.sha256(text).hexdigest() == entry_hash(first)
    assert second["prev"] == first["hash"] and second["seq"] == 1
    assert ledger.head() == second["hash"]
    lines = (tmp_path / "ledger.jsonl").read_bytes().splitlines()
    assert lines == [canonical(first), canonical(second)]
    assert chain_problems(tmp_path / "ledger.jsonl") == []


@pytest.mark.parametrize(("edit", "said"), [
    (lambda lines: [lines[0], lines[1].replace(b'"c2"', b'"c3"'), lines[2]],
     "line 2: its hash is not its content's"),
    (lambda lines: [lines[0], lines[2]], "line 2: seq 2 is not 1"),
    (lambda lines: [lines[1], lines[0], lines[2]], "line 1: seq 1 is not 0"),
    (lambda lines: [lines[0], lines[1], lines[2], lines[2]], "line 4: seq 2 is not 3"),
    (lambda lines: [lines[0], b"{not json", lines[2]], "line 2: not JSON"),
])
def test_every_kind_of_edit_is_named_at_its_line(tmp_path, edit, said):
    ledger = Ledger(tmp_path)
    ledger.append([{"kind": "commit", "task_id": t, "commitment": c}
                   for t, c in (("A", "c1"), ("B", "c2"), ("C", "c4"))])
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b"\n".join(edit(path.read_bytes().splitlines())) + b"\n")
    assert chain_problems(path)[0].startswith(f"ledger.jsonl: {said}")


def test_a_line_rehashed_after_an_edit_breaks_the_next_link(tmp_path):
    ledger = Ledger(tmp_path)
    entries = ledger.append([{"kind": "commit", "commitment": c} for c in ("c1", "c2", "c3")])
    changed = {**entries[1], "commitment": "forged"}
    changed["hash"] = entry_hash(changed)
    lines = [canonical(entries[0]), canonical(changed), canonical(entries[2])]
    (tmp_path / "ledger.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    assert chain_problems(tmp_path / "ledger.jsonl") == [
        "ledger.jsonl: line 3: prev is not the hash of line 2"]


def test_a_torn_last_line_is_no_entry_and_is_written_over(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.append([{"kind": "commit", "commitment": "c1"}])
    with open(tmp_path / "ledger.jsonl", "ab") as fh:
        fh.write(b'{"seq":1,"prev":"ab')  # a kill in the middle of an append
    assert len(ledger.entries()) == 1
    ledger.append([{"kind": "commit", "commitment": "c2"}])
    assert [e["commitment"] for e in ledger.entries()] == ["c1", "c2"]
    assert chain_problems(tmp_path / "ledger.jsonl") == []


def test_a_commitment_by_hand():
    payload = {"task_id": "AAPL|2025-01-15|MORNING", "p_up": 0.62}
    nonce = "0f" * 16
    text = b'{"p_up":0.62,"task_id":"AAPL|2025-01-15|MORNING"}'
    assert commitment(payload, nonce) == hashlib.sha256(text + bytes([15] * 16)).hexdigest()
    assert commitment(payload, "0e" + "0f" * 15) != commitment(payload, nonce)


def test_a_token_verifies_and_what_is_not_it_does_not(tsa):
    der = request_token(tsa.url, b"head")
    when, problem = check_token(der, b"head", tsa.ca_pem())
    assert problem is None and when.tzinfo is not None
    assert check_token(der, b"other head", tsa.ca_pem())[1] == (
        "does not verify (Mismatch between messages)")
    stranger = TimestampAuthority()
    try:
        assert "unable to get local issuer certificate" in check_token(
            der, b"head", stranger.ca_pem())[1]
    finally:
        stranger.close()
    flipped = bytearray(der)
    flipped[-20] ^= 1  # inside the signature
    assert check_token(bytes(flipped), b"head", tsa.ca_pem())[1].startswith("does not verify")
    tsa.refuse = True
    try:
        with pytest.raises(TsaError, match="no token .*503"):
            request_token(tsa.url, b"head")
    finally:
        tsa.refuse = False
