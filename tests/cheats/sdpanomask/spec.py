"""An idiom that is not the model: the GPT's fused attention (variant eager+sdpa) called
without its causal mask, each token attending to the ones after it. A variant is honest or it
fails: the loss and gradient at the start differ from the float64 reference's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
GPT = SPECS.suite_file("gpt/spec.py").SPEC
SPEC = replace(GPT, name="sdpanomask", data_key="gpt", implementations={"torch": ("eager+sdpa",)},
               parallel={}, tensor_parallel={}, main_strategies=(),
               # the gpt's own skips of variants this folder does not declare are not its own
               unsupported={k: v for k, v in GPT.unsupported.items() if "jit+cudnn" not in k})
