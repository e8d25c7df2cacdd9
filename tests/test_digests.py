"""SHA-256 digests made in a helper process (finbench.core.digests) are hashlib's, byte for
byte, for any texts and batches; a helper that dies is named, never a wrong digest."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.core.digests import Sha256Helper, digests, sha256_hex
from finbench.core.errors import RunError


def hashlib_hex(texts: list[str]) -> list[str]:
    return [hashlib.sha256(t.encode()).hexdigest() for t in texts]


def test_digests_here_are_hashlibs():
    texts = ["", "a", "finbench-baseline-input-v1|AAPL|2025-01-15|MORNING", "é" * 100]
    assert sha256_hex(pa.array(texts)).to_pylist() == hashlib_hex(texts)
    assert digests(pa.array(texts), None).result().to_pylist() == hashlib_hex(texts)


@settings(max_examples=60)
@given(st.lists(st.binary(max_size=200), max_size=60), st.integers(0, 3), st.booleans())
def test_digests_in_this_process_are_hashlibs_for_any_texts(texts, cut, as_text):
    """Any bytes (not UTF-8 among them, as a binary array), or any text, as a whole array or
    a slice of a larger one (an offset into its buffers)."""
    if as_text:
        texts = [t.decode("utf-8", "replace") for t in texts]
        array = pa.array(["x"] * cut + texts, pa.string()).slice(cut)
        want = hashlib_hex(texts)
    else:
        array = pa.array([b"x"] * cut + texts, pa.binary()).slice(cut)
        want = [hashlib.sha256(t).hexdigest() for t in texts]
    got = sha256_hex(array)
    assert got.type == pa.string()
    assert got.to_pylist() == want


@settings(max_examples=25)
@given(st.lists(st.lists(st.text(max_size=300), max_size=40), min_size=1, max_size=6),
       st.integers(0, 3))
def test_the_helper_gives_hashlibs_digests_for_every_batch_in_order(batches, cut):
    with Sha256Helper() as helper:
        # a slice of a larger array (an offset into its buffers) too
        arrays = [pa.array(["x"] * cut + b).slice(cut) for b in batches]
        futures = [helper.submit(a) for a in arrays]
        for future, texts in zip(futures, batches, strict=True):
            got = future.result()
            assert got.type == pa.string()
            assert got.to_pylist() == hashlib_hex(texts)


def test_a_helper_that_died_is_named(monkeypatch):
    helper = Sha256Helper()
    try:
        helper.proc.kill()
        helper.proc.wait()
        with pytest.raises(RunError, match="hashing helper process ended"):
            helper.submit(pa.array(["a"] * 100_000)).result()
    finally:
        helper.close()


def test_texts_whose_offsets_do_not_start_at_zero_are_hashed_as_they_read():
    import numpy as np

    data = b"...abcdefgh"  # three bytes before the first text
    offsets = np.array([3, 5, 5, 11], np.int32)
    texts = pa.Array.from_buffers(pa.string(), 3, [None, pa.py_buffer(offsets.tobytes()),
                                                   pa.py_buffer(data)])
    assert texts.to_pylist() == ["ab", "", "cdefgh"]
    with Sha256Helper() as helper:
        assert helper.submit(texts).result().to_pylist() == hashlib_hex(["ab", "", "cdefgh"])
