"""The session's conftest.py: a JAX adapter whose data-parallel trainer cheats for the dpshard
workload (through the pytest_mlbench_adapters hook, as a user's conftest could) and behaves as
the built-in one for every other case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file, sgd_step
from pytest_mlbench.frameworks.jax_ import JaxAdapter

SPECS = load_suite_file(Path(__file__).parent / "suites" / "specs.py")


class CheatingJax(JaxAdapter):
    def data_parallel(self, case: Any, loss: Any, dp: dict[str, Any]) -> Any:
        """The built-in Mesh trainer; dpshard's, after the checked steps, steps on the first
        half of the global batch through a second jitted step warmed up here."""
        trainer = super().data_parallel(case, loss, dp)
        if case.id.workload.name != "dpshard":
            return trainer
        import jax

        half = jax.jit(sgd_step(loss, jax.value_and_grad, case.learning_rate))
        return SPECS.HalfBatch(trainer, half, warm=jax.block_until_ready)


def pytest_mlbench_adapters(config: Any) -> dict[str, Any]:
    return {"jax": CheatingJax}
