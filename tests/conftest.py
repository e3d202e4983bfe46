"""Shared test set-up: tests/ on sys.path (for the fixture modules), quiet third-party logs."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
