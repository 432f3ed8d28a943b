from __future__ import annotations

import pytest

from routectl.policy.resolve import reset_deprecation_warnings


@pytest.fixture(autouse=True)
def _fresh_deprecation_registry():
    # The only process-wide state: which deprecated variables already warned.
    reset_deprecation_warnings()
    yield
    reset_deprecation_warnings()
