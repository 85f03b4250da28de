"""Whether text follows JSON's grammar (RFC 8259), at any depth of nesting.

The bodies' parser (orjson) refuses some JSON: a number beyond double range, a lone
surrogate escape, and nesting deeper than 1,024 levels. Such a body is JSON all the same
(a 422, not a 400), so a refused body is checked here. The standard library's parser checks
most; it recurses per level, so deeper text is checked by :func:`_flat_grammatical`, which
does not: scalars and strings become one letter each (regular expressions, in C), and a
loop over what is left follows the nesting with a stack.
"""

from __future__ import annotations

import json
import re

__all__ = ["grammatical", "refuse_constant"]

_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")
_SPACE = re.compile(r"[ \t\n\r]+")
_TOKENS = frozenset("{}[]:,sv")

# what the next token may be
_VALUE, _KEY, _COLON, _AFTER = range(4)


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
    """:func:`grammatical` without recursion: strings become ``s``, other scalars and empty
    containers ``v`` (scalars before whitespace goes, so ``1 2`` stays two values), then the
    structure is followed token by token."""
    tokens = _SPACE.sub("", _SCALAR.sub("v", _STRING.sub("s", text)))
    tokens = tokens.replace("[]", "v").replace("{}", "v")
    if not _TOKENS.issuperset(tokens):
        return False
    stack: list[str] = []
    state = _VALUE
    for c in tokens:
        if state == _VALUE:
            if c == "s" or c == "v":
                state = _AFTER
            elif c == "[" or c == "{":
                stack.append(c)
                state = _VALUE if c == "[" else _KEY
            else:
                return False
        elif state == _KEY:
            if c != "s":
                return False
            state = _COLON
        elif state == _COLON:
            if c != ":":
                return False
            state = _VALUE
        else:  # _AFTER: a value ended
            if not stack:
                return False  # text after the one value
            if c == ",":
                state = _VALUE if stack[-1] == "[" else _KEY
            elif (c == "]" and stack[-1] == "[") or (c == "}" and stack[-1] == "{"):
                stack.pop()
            else:
                return False
    return state == _AFTER and not stack
