"""64-bit mixing for key codes and the ``hash`` function (vectorised, wrapping arithmetic),
and the BLAKE2b digests that ``hash`` takes of strings."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from engine import parallel

__all__ = [
    "SPLIT_FROM",
    "blake2b_64",
    "key_codes",
    "mix64",
    "row_codes",
    "row_codes_into",
    "string_hashes",
]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
SPLIT_FROM = 1 << 16  # rows from which key_codes hashes on two threads


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on a uint64 array."""
    with np.errstate(over="ignore"):
        x = x + _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def key_codes(keys: np.ndarray) -> np.ndarray:
    """One int64 per key row of a ``(kk, n)`` block: the value itself for a single column
    (exact), a mixed hash for several columns (equal keys, equal codes; collisions possible),
    zeros for no columns. From ``SPLIT_FROM`` rows two threads hash a half each."""
    kk, n = keys.shape
    if kk == 0:
        return np.zeros(n, dtype=np.int64)
    if kk == 1:
        return keys[0]
    cols, out = np.arange(kk, dtype=np.int64), np.empty(n, dtype=np.int64)
    if n < SPLIT_FROM or parallel.threads() < 2:  # the same kernel either way: one compile
        row_codes_into(keys, cols, out, 0, n)
        return out
    h = n // 2
    parallel.both(
        lambda: row_codes_into(keys, cols, out, 0, h), lambda: row_codes_into(keys, cols, out, h, n)
    )
    return out


@njit(cache=True, nogil=True)
def _mix64_scalar(x: np.uint64) -> np.uint64:
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True, nogil=True)
def row_codes(data: np.ndarray, key_cols: np.ndarray) -> np.ndarray:
    """:func:`key_codes` of the key columns ``key_cols`` of a ``(ncols, n)`` block, in one
    compiled pass (numpy's version is a dozen whole-array operations per key column; a
    compiled call per row costs ~30 ns in reference counts)."""
    out = np.empty(data.shape[1], np.int64)
    row_codes_into(data, key_cols, out, 0, data.shape[1])
    return out


@njit(cache=True, nogil=True)
def row_codes_into(
    data: np.ndarray, key_cols: np.ndarray, out: np.ndarray, lo: int, hi: int
) -> None:
    """:func:`row_codes` of rows ``lo:hi``, written to ``out[lo:hi]`` (two threads each
    write their half of one array, with nothing to join after)."""
    kk = key_cols.shape[0]
    for i in range(lo, hi):
        if kk == 0:
            out[i] = 0
        elif kk == 1:
            out[i] = data[key_cols[0], i]
        else:
            h = np.uint64(0x9E3779B97F4A7C15)
            for j in range(kk):
                h = _mix64_scalar(h ^ np.uint64(data[key_cols[j], i]))
            out[i] = np.int64(h)


# BLAKE2b (RFC 7693) with an 8-byte digest, no key: the ``hash`` of a string is this digest
# of its UTF-8 bytes, read little-endian. hashlib's costs a Python call per string (about
# 1 µs); this hashes a whole list's bytes in one compiled pass.
_IV = np.array(
    [
        0x6A09E667F3BCC908,
        0xBB67AE8584CAA73B,
        0x3C6EF372FE94F82B,
        0xA54FF53A5F1D36F1,
        0x510E527FADE682D1,
        0x9B05688C2B3E6C1F,
        0x1F83D9ABFB41BD6B,
        0x5BE0CD19137E2179,
    ],
    dtype=np.uint64,
)
_SIGMA = np.array(
    [
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
        [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
        [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
        [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
        [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
        [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
        [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
        [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
        [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
        [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
    ],
    dtype=np.int64,
)
_DIGEST_BYTES = 8


@njit(cache=True, nogil=True, inline="always")
def _rotr(x: np.uint64, n: int) -> np.uint64:
    return (x >> np.uint64(n)) | (x << np.uint64(64 - n))


@njit(cache=True, nogil=True, inline="always")
def _mix(
    a: np.uint64, b: np.uint64, c: np.uint64, d: np.uint64, x: np.uint64, y: np.uint64
) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:
    """BLAKE2b's G function on four words of the work vector (kept in registers)."""
    a = a + b + x
    d = _rotr(d ^ a, 32)
    c = c + d
    b = _rotr(b ^ c, 24)
    a = a + b + y
    d = _rotr(d ^ a, 16)
    c = c + d
    b = _rotr(b ^ c, 63)
    return a, b, c, d


@njit(cache=True, nogil=True)
def blake2b_64(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The 8-byte BLAKE2b digest, little-endian as int64, of each message
    ``data[offsets[i]:offsets[i + 1]]`` (``data`` uint8)."""
    n = offsets.shape[0] - 1
    out = np.empty(n, np.int64)
    h = np.empty(8, np.uint64)
    m = np.empty(16, np.uint64)
    iv, sigma = _IV, _SIGMA
    for i in range(n):
        lo, hi = offsets[i], offsets[i + 1]
        for j in range(8):
            h[j] = iv[j]
        h[0] ^= np.uint64(0x01010000 ^ _DIGEST_BYTES)  # no key, 8-byte digest
        blocks = max(1, (hi - lo + 127) // 128)
        for blk in range(blocks):
            start = lo + 128 * blk
            stop = min(start + 128, hi)
            m[:] = 0  # the block's words, little-endian, zero-padded
            for p in range(start, stop):
                k = p - start
                m[k >> 3] |= np.uint64(data[p]) << np.uint64(8 * (k & 7))
            v0, v1, v2, v3, v4, v5, v6, v7 = h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
            v8, v9, v10, v11 = iv[0], iv[1], iv[2], iv[3]
            v12 = iv[4] ^ np.uint64(stop - lo)  # bytes so far (messages under 2**64 bytes)
            v13, v14, v15 = iv[5], iv[6], iv[7]
            if blk == blocks - 1:
                v14 = ~v14
            for r in range(12):
                s = r % 10
                v0, v4, v8, v12 = _mix(v0, v4, v8, v12, m[sigma[s, 0]], m[sigma[s, 1]])
                v1, v5, v9, v13 = _mix(v1, v5, v9, v13, m[sigma[s, 2]], m[sigma[s, 3]])
                v2, v6, v10, v14 = _mix(v2, v6, v10, v14, m[sigma[s, 4]], m[sigma[s, 5]])
                v3, v7, v11, v15 = _mix(v3, v7, v11, v15, m[sigma[s, 6]], m[sigma[s, 7]])
                v0, v5, v10, v15 = _mix(v0, v5, v10, v15, m[sigma[s, 8]], m[sigma[s, 9]])
                v1, v6, v11, v12 = _mix(v1, v6, v11, v12, m[sigma[s, 10]], m[sigma[s, 11]])
                v2, v7, v8, v13 = _mix(v2, v7, v8, v13, m[sigma[s, 12]], m[sigma[s, 13]])
                v3, v4, v9, v14 = _mix(v3, v4, v9, v14, m[sigma[s, 14]], m[sigma[s, 15]])
            h[0] ^= v0 ^ v8
            h[1] ^= v1 ^ v9
            h[2] ^= v2 ^ v10
            h[3] ^= v3 ^ v11
            h[4] ^= v4 ^ v12
            h[5] ^= v5 ^ v13
            h[6] ^= v6 ^ v14
            h[7] ^= v7 ^ v15
        out[i] = np.int64(h[0])
    return out


def string_hashes(strings: Sequence[str]) -> np.ndarray:
    """blake2b-64 of each string's UTF-8 bytes, read little-endian as int64 (``hash`` of a
    string), for a whole list in one compiled call."""
    n = len(strings)
    joined = "".join(strings)
    if joined.isascii():  # one byte a character: the lengths are the strings'
        data = joined.encode()
        lengths = np.fromiter(map(len, strings), dtype=np.int64, count=n)
    else:
        encoded = [s.encode() for s in strings]
        data = b"".join(encoded)
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return blake2b_64(np.frombuffer(data, dtype=np.uint8), offsets)
