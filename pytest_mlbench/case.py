"""One benchmark case: what collection knows (CaseId, cheap, no framework imported) and what
an implementation's build(case) receives at run time (Case)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_mlbench.frameworks.base import Compiled
from pytest_mlbench.precision import Policy
from pytest_mlbench.workload import Shape, Workload


@dataclass(frozen=True)
class CaseId:
    workload: Workload
    shape: Shape
    framework: str
    variant: str
    device: str
    precision: str

    @property
    def name(self) -> str:
        """``mlp-jax-jit-cpu-fp32``; a shape label follows the workload (``linreg-d10-...``)."""
        head = f"{self.workload.name}-{self.shape.label}" if self.shape.label else self.workload.name
        return f"{head}-{self.framework}-{self.variant}-{self.device}-{self.precision}"

    @property
    def group(self) -> str:
        """Cases compared with each other in one table: same workload, shape, device, precision."""
        head = f"{self.workload.name}-{self.shape.label}" if self.shape.label else self.workload.name
        return f"{head} {self.device} {self.precision}"


@dataclass
class Case:
    """What an implementation's ``build(case)`` gets. Arrays are already on the device at the
    policy's dtype, made from the same seeded bytes for every framework."""

    id: CaseId
    adapter: Any
    policy: Policy
    data: dict[str, Any]
    params: dict[str, Any]
    seed: int
    compiled: list[Compiled] = field(default_factory=list)

    @property
    def learning_rate(self) -> float:
        return self.id.workload.learning_rate

    @property
    def dims(self) -> Any:
        return self.id.shape.dims

    @property
    def variant(self) -> str:
        return self.id.variant

    @property
    def dtype(self) -> str:
        """The policy's dtype name (``float32``, ``float64``, ``bfloat16``)."""
        return self.policy.dtype

    def compile(self, fn: Callable[..., Any]) -> Compiled:
        """Apply this case's variant to ``fn`` (identity for eager); the harness later checks
        that it compiled, and that it did not compile again while timed."""
        compiled = self.adapter.compile(fn, self.variant)
        self.compiled.append(compiled)
        return compiled

    def traces(self) -> list[int]:
        return [c.traces() for c in self.compiled]
