"""Test setup for sim/: import path and the ``nojit`` marker."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "nojit: small tests also run with NUMBA_DISABLE_JIT=1 (test_nojit.py)")
