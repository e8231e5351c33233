"""torch.compile as the harness applies it compiles a case's training step once
(docs/journal/2026-11-28-test-line-compile.md).

inductor itself is replaced by the FX graph's own forward here (no C++ build): what is under
test is which graphs dynamo hands to the backend."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from pytest_mlbench.builders import torch_ as torch_builder  # noqa: E402
from pytest_mlbench.frameworks.torch_ import TorchAdapter  # noqa: E402
from pytest_mlbench.workloads.optim import momentum  # noqa: E402


@pytest.fixture
def graphs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The graphs the adapter's backend is handed, by name, each run as traced."""
    from torch._inductor import compile_fx

    seen: list[str] = []

    def no_inductor(gm: Any, example_inputs: Any) -> Any:
        seen.append(type(gm).__name__)
        return gm.forward

    monkeypatch.setattr(compile_fx, "compile_fx", no_inductor)
    torch._dynamo.reset()
    yield seen
    torch._dynamo.reset()


class Stepper:
    """A training step as builders/torch_.py's Trainer holds one: a method reading the
    batch from ``self.data``, so every case's step is one code object."""

    def __init__(self, opt: torch.optim.Optimizer, w: Any, x: Any) -> None:
        self.opt, self.w, self.data = opt, w, {"x": x}

    def step(self) -> Any:
        self.w.grad = None
        loss = (self.data["x"] @ self.w).tanh().sum()
        loss.backward()
        self.opt.step()
        return loss.detach()


def step_of(opt: torch.optim.Optimizer, w: Any, x: Any) -> Any:
    return TorchAdapter().compile(Stepper(opt, w, x).step, "jit")


def test_a_momentum_step_compiles_once(graphs: list[str]) -> None:
    """torch makes SGD's momentum buffers at the first step: traced without them, the whole
    optimizer step compiled again at the second (the builder starts them at zero)."""
    w = torch.nn.Parameter(torch.randn(8, 4))
    step = step_of(torch_builder.optimizer(momentum(0.1), [w]), w, torch.randn(16, 8))
    step()
    first = len(graphs)
    for _ in range(3):
        step()
    assert first > 0 and len(graphs) == first, (
        f"{len(graphs) - first} graph(s) compiled after the first step")
