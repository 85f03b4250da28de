"""Whether text follows JSON's grammar (RFC 8259), at any depth of nesting.

The bodies' parser (orjson) refuses some JSON: a number beyond double range, a lone
surrogate escape, and nesting deeper than 1,024 levels. Such a body is JSON all the same
(a 422, not a 400), so a refused body is checked here, by a compiled loop over its bytes
that follows the nesting with a stack (the standard library's parser recurses per level,
and turning strings and scalars into tokens with regular expressions took seconds). It runs
where requests are read, so it must not take seconds: 60 MB take a fraction of one.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["grammatical", "refuse_constant"]

_OBJECT, _END_OBJECT, _LIST, _END_LIST, _COLON_TOKEN, _COMMA, _QUOTE, _BACKSLASH = b'{}[]:,"\\'
_MINUS, _PLUS, _DOT, _ZERO, _NINE = b"-+.09"
_SPACE = tuple(b" \t\n\r")
_ESCAPED = tuple(b'"\\/bfnrt')
_EXPONENT = tuple(b"eE")
_TRUE, _FALSE, _NULL = (np.frombuffer(w, np.uint8) for w in (b"true", b"false", b"null"))

# what the next token may be
_VALUE, _KEY, _COLON, _AFTER, _FIRST_VALUE, _FIRST_KEY = range(6)


def refuse_constant(constant: str) -> None:
    """``parse_constant`` for the standard library's parser: NaN and Infinity are not JSON."""
    raise ValueError(f"{constant} is not JSON")


def grammatical(raw: bytes | str) -> bool:
    """Whether ``raw`` (UTF-8 if bytes) is one JSON value, surrounded by whitespace."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    else:
        try:
            raw.decode("utf-8")  # strings may hold any UTF-8; the loop reads bytes
        except UnicodeDecodeError:
            return False
    return bool(_one_value(np.frombuffer(raw, np.uint8), _TRUE, _FALSE, _NULL))


@njit(cache=True, nogil=True)
def _string_end(b: np.ndarray, i: int) -> int:
    """Past the string opening at ``i``, or -1 where it is not one (unclosed, a control
    character, a bad escape)."""
    n = b.shape[0]
    j = i + 1
    while j < n:
        c = b[j]
        if c == _QUOTE:
            return j + 1
        if c < 0x20:
            return -1
        if c == _BACKSLASH:
            if j + 1 >= n:
                return -1
            e = b[j + 1]
            if e in _ESCAPED:
                j += 2
            elif e == 117:  # u: four hex digits
                if j + 6 > n:
                    return -1
                for k in range(j + 2, j + 6):
                    h = b[k]
                    if not (_ZERO <= h <= _NINE or 97 <= h <= 102 or 65 <= h <= 70):
                        return -1
                j += 6
            else:
                return -1
        else:
            j += 1
    return -1


@njit(cache=True, nogil=True)
def _digits_end(b: np.ndarray, j: int) -> int:
    n = b.shape[0]
    while j < n and _ZERO <= b[j] <= _NINE:
        j += 1
    return j


@njit(cache=True, nogil=True)
def _number_end(b: np.ndarray, i: int) -> int:
    """Past the number beginning at ``i`` (``-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?``),
    or -1 where it is not one."""
    n = b.shape[0]
    j = i + 1 if b[i] == _MINUS else i
    if j >= n or not _ZERO <= b[j] <= _NINE:
        return -1
    j = j + 1 if b[j] == _ZERO else _digits_end(b, j)
    if j < n and b[j] == _DOT:
        k = _digits_end(b, j + 1)
        if k == j + 1:
            return -1
        j = k
    if j < n and b[j] in _EXPONENT:
        j += 1
        if j < n and (b[j] == _PLUS or b[j] == _MINUS):
            j += 1
        k = _digits_end(b, j)
        if k == j:
            return -1
        j = k
    return j


@njit(cache=True, nogil=True)
def _word_end(b: np.ndarray, i: int, word: np.ndarray) -> int:
    """Past ``word`` (true, false, null) at ``i``, or -1."""
    if i + word.shape[0] > b.shape[0]:
        return -1
    for k in range(word.shape[0]):
        if b[i + k] != word[k]:
            return -1
    return i + word.shape[0]


@njit(cache=True, nogil=True)
def _one_value(b: np.ndarray, true: np.ndarray, false: np.ndarray, null: np.ndarray) -> bool:
    """Whether the bytes ``b`` are one JSON value with JSON's whitespace around it."""
    n = b.shape[0]
    stack = np.empty(n, np.uint8)  # the containers open
    top = 0
    state = _VALUE
    i = 0
    while i < n:
        c = b[i]
        if c in _SPACE:
            i += 1
            continue
        if state in (_VALUE, _FIRST_VALUE):
            if c == _QUOTE:
                i = _string_end(b, i)
            elif c == _MINUS or _ZERO <= c <= _NINE:
                i = _number_end(b, i)
            elif c == 116:  # t
                i = _word_end(b, i, true)
            elif c == 102:  # f
                i = _word_end(b, i, false)
            elif c == 110:  # n
                i = _word_end(b, i, null)
            elif c in (_LIST, _OBJECT):
                stack[top] = c
                top += 1
                state = _FIRST_VALUE if c == _LIST else _FIRST_KEY
                i += 1
                continue
            elif c == _END_LIST and state == _FIRST_VALUE:
                top -= 1
                i += 1
            else:
                return False
            if i < 0:
                return False
            state = _AFTER
        elif state in (_KEY, _FIRST_KEY):
            if c == _QUOTE:
                i = _string_end(b, i)
                if i < 0:
                    return False
                state = _COLON
            elif c == _END_OBJECT and state == _FIRST_KEY:
                top -= 1
                i += 1
                state = _AFTER
            else:
                return False
        elif state == _COLON:
            if c != _COLON_TOKEN:
                return False
            i += 1
            state = _VALUE
        else:  # _AFTER: a value ended
            if top == 0:
                return False  # text after the one value
            if c == _COMMA:
                state = _VALUE if stack[top - 1] == _LIST else _KEY
            elif (c == _END_LIST and stack[top - 1] == _LIST) or (
                c == _END_OBJECT and stack[top - 1] == _OBJECT
            ):
                top -= 1
            else:
                return False
            i += 1
    return state == _AFTER and top == 0
