"""Autograd: NumPy with reverse-mode differentiation, eager only, CPU only."""

from __future__ import annotations

from pytest_mlbench.frameworks.base import package_versions
from pytest_mlbench.frameworks.numpy_ import NumpyAdapter


class AutogradAdapter(NumpyAdapter):
    name = "autograd"
    modules = ("autograd",)
    extra = "autograd"

    def versions(self) -> dict[str, str]:
        return package_versions("autograd", "numpy")
