"""Whether text follows JSON's grammar (RFC 8259), at any depth of nesting.

The bodies' parser (orjson) refuses some JSON: a number beyond double range, a lone
surrogate escape, and nesting deeper than 1,024 levels. Such a body is JSON all the same
(a 422, not a 400), so a refused body is checked here. The standard library's parser checks
most; it recurses per level, so deeper text is checked by :func:`_flat_grammatical`, which
does not: scalars and strings become one letter each (regular expressions, in C), and a
compiled loop follows what is left with a stack. It runs where requests are read, so it
must not take seconds (60 MB of nested lists: about half a second).
"""

from __future__ import annotations

import json
import re

import numpy as np
from numba import njit

__all__ = ["grammatical", "refuse_constant"]

_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
# a number, true, false or null; written to begin with a class of characters, which the
# regular expression engine searches fast (about 8x faster over text with no scalar)
_FRACTION_EXPONENT = r"(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_SCALAR = re.compile(
    r"[-0-9tfn](?:"
    rf"(?<=-)(?:0|[1-9][0-9]*){_FRACTION_EXPONENT}|(?<=0){_FRACTION_EXPONENT}"
    rf"|(?<=[1-9])[0-9]*{_FRACTION_EXPONENT}|(?<=t)rue|(?<=f)alse|(?<=n)ull)"
)
_OBJECT, _END_OBJECT, _LIST, _END_LIST, _COLON_TOKEN, _COMMA, _S, _V = b"{}[]:,sv"
_SPACE = tuple(b" \t\n\r")

# what the next token may be
_VALUE, _KEY, _COLON, _AFTER, _FIRST_VALUE, _FIRST_KEY = range(6)


def refuse_constant(constant: str) -> None:
    """``parse_constant`` for the standard library's parser: NaN and Infinity are not JSON."""
    raise ValueError(f"{constant} is not JSON")


def _grammar_only(digits: str) -> int:
    """An integer's digits, not converted: ``int()`` refuses more than 4,300 of them."""
    return 0


def grammatical(raw: bytes | str) -> bool:
    """Whether ``raw`` (UTF-8 if bytes) is one JSON value, surrounded by whitespace."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        return False
    try:
        json.loads(text, parse_constant=refuse_constant, parse_int=_grammar_only)
    except ValueError:  # JSONDecodeError, and NaN or Infinity
        return False
    except RecursionError:
        return _flat_grammatical(text)
    return True


def _flat_grammatical(text: str) -> bool:
    """:func:`grammatical` without recursion: strings become ``s`` and other scalars ``v``
    (before whitespace goes, so ``1 2`` stays two values); a compiled loop follows the
    rest."""
    try:
        raw = _SCALAR.sub("v", _STRING.sub("s", text)).encode("ascii")
    except UnicodeEncodeError:  # outside strings JSON is ASCII
        return False
    return bool(_follows_grammar(np.frombuffer(raw, np.uint8)))


@njit(cache=True, nogil=True)
def _follows_grammar(t: np.ndarray) -> bool:
    """Whether the tokens ``{}[]:,sv`` (with JSON's whitespace between) are one value."""
    stack = np.empty(t.shape[0], np.uint8)  # the containers open
    top = 0
    state = _VALUE
    for i in range(t.shape[0]):
        c = t[i]
        if c in _SPACE:
            continue
        if state in (_VALUE, _FIRST_VALUE):
            if c in (_S, _V):
                state = _AFTER
            elif c in (_LIST, _OBJECT):
                stack[top] = c
                top += 1
                state = _FIRST_VALUE if c == _LIST else _FIRST_KEY
            elif c == _END_LIST and state == _FIRST_VALUE:
                top -= 1
                state = _AFTER
            else:
                return False
        elif state in (_KEY, _FIRST_KEY):
            if c == _S:
                state = _COLON
            elif c == _END_OBJECT and state == _FIRST_KEY:
                top -= 1
                state = _AFTER
            else:
                return False
        elif state == _COLON:
            if c != _COLON_TOKEN:
                return False
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
    return state == _AFTER and top == 0
