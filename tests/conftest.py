"""Shared test configuration: hypothesis profiles (``HYPOTHESIS_PROFILE=thorough`` for long
campaigns; the default keeps the whole suite inside CI's budget)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "default")
_THOROUGH_TIMES = 10  # the thorough profile's examples against the default's, about

settings.register_profile(
    "default", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.load_profile(_PROFILE)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under the thorough profile a test without a timeout of its own gets ten times the
    default one (``timeout`` in pyproject.toml), as it runs ten times the examples: 2,000
    random plans through the server took over the 600 s. A ``--timeout`` given stands."""
    if _PROFILE != "thorough" or config.getoption("timeout", None) is not None:
        return
    default = float(config.getini("timeout") or 0)
    for item in items:
        if default and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(default * _THOROUGH_TIMES))
