"""The honest control of ampf32, ampmaster and ampnoscale: the suite's own mlp at the amp and
amp16 policies, in every framework that has mixed precision, in the same session; it passes
the checks they fail."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = replace(SPECS.mlp("ampok", jax=("eager", "jit"), torch=("eager",), tensorflow=("eager",)),
               default_precisions=("amp", "amp16"))
