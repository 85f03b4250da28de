"""The JSON grammar check for bodies the parser refused, against the standard library's."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from api.json_grammar import grammatical

# JSON's characters and some that are not, so that most texts are almost JSON
_PIECES = st.sampled_from(
    ["{", "}", "[", "]", ":", ",", " ", "\n", '"a"', '"\\u00e9"', '"\\x"', '"', "1", "-0.5e3",
     "01", "1.", "true", "nul", "null", "NaN", "x", "\\", "\t", '"\\"', "\x01"]
)  # fmt: skip


def _stdlib(text: str) -> bool:
    def refuse(constant: str) -> None:
        raise ValueError(constant)

    try:
        json.loads(text, parse_constant=refuse)
    except ValueError:
        return False
    return True


@given(st.lists(_PIECES, max_size=30).map("".join))
def test_agrees_with_the_standard_library_where_it_nests_little(text: str) -> None:
    assert grammatical(text) == _stdlib(text)
    deep = "[" * 3000 + text + "]" * 3000  # the same text, past where the stdlib recurses
    assert grammatical(deep) == _stdlib(f"[{text}]")


def test_deep_texts() -> None:
    assert grammatical('{"a": ' * 5000 + "[1, 2.5, null, {}]" + "}" * 5000)
    assert grammatical(("[" * 4000 + "]" * 4000).encode())
    assert not grammatical("[" * 4000 + "]" * 3999)
    assert not grammatical("[" * 4000 + "}" * 4000)
    assert not grammatical('{"a": ' * 4000 + "1" + "}" * 3999 + "]")
    assert not grammatical('{"a" ' * 4000 + "1" + "}" * 4000)  # no colons
    assert not grammatical("[" * 4000 + "1 2" + "]" * 4000)
    assert not grammatical(b"[" * 4000 + b"\xff" + b"]" * 4000)  # not UTF-8
