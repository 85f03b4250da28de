"""The ``hash`` of strings: the compiled BLAKE2b digest equals hashlib's, for any text."""

from __future__ import annotations

import hashlib

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from engine.hashing import string_hashes


def _hashlib(strings: list[str]) -> list[int]:
    digests = [hashlib.blake2b(s.encode(), digest_size=8).digest() for s in strings]
    return [int.from_bytes(d, "little", signed=True) for d in digests]


@given(st.lists(st.text(max_size=300), max_size=20))
@example([])
@example(["", "a" * 127, "a" * 128, "a" * 129, "b" * 256, "é" * 64, "日本語", "\x00"])
def test_string_hashes_equal_hashlib_blake2b(strings: list[str]) -> None:
    """Empty, one-block and multi-block messages (128 bytes a block), ASCII or not."""
    got = string_hashes(strings)
    assert got.dtype == np.int64 and got.shape == (len(strings),)
    assert got.tolist() == _hashlib(strings)


@given(st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", max_size=40)))
def test_ascii_lists_take_the_same_digests(strings: list[str]) -> None:
    assert string_hashes(strings).tolist() == _hashlib(strings)
