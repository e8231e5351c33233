"""pytest-mlbench: fair, correctness-gated benchmarks of automatic-differentiation frameworks."""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
