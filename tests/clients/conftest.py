"""Fixtures of the client tests (the doubles themselves live in ``doubles.py``)."""

from __future__ import annotations

import pytest

from tests.clients.doubles import Exchange


@pytest.fixture
def exchange() -> Exchange:
    return Exchange()
