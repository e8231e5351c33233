"""The ViT of suites/vit/impl_tensorflow.py: its builder runs the forward pass for an inference task."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

build = load_suite_file(Path(__file__).parent.parent / "vit" / "impl_tensorflow.py").build
