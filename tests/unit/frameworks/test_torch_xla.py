"""torch's xla mode (frameworks/torch_xla_.py): without torch_xla its cases skip naming the job
that installs it; with it (tox -e bench-xla), bytes and dtype round-trip through the XLA device,
the step compiles once and is counted, a second graph is a compilation the harness sees, and a
step that reads a value on the host, or copies device data to it, fails."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import frameworks
from pytest_mlbench.errors import PolicyNotApplied, Unsupported
from pytest_mlbench.precision import POLICIES, dtype_name, numpy_dtype

pytest.importorskip("torch")
XLA = importlib.util.find_spec("torch_xla") is not None
needs_xla = pytest.mark.skipif(not XLA, reason="torch_xla is not installed: these run in "
                                                "tox exec -e bench-xla -- python -m pytest ...")
JOB = "tox -e bench-xla"


def test_without_torch_xla_the_xla_mode_is_missing_naming_the_job(
        monkeypatch: pytest.MonkeyPatch) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch_xla" else find_spec(name, *a))
    reason = frameworks.missing_reason("torch", frameworks.BUILTIN, "xla")
    assert reason is not None and reason.startswith(
        "torch's xla mode needs torch_xla, which is not installed: " + JOB)
    assert "\n" not in reason
    for mode in ("eager", "jit", ""):  # torch itself is there: its other modes run
        assert frameworks.missing_reason("torch", frameworks.BUILTIN, mode) is None


def test_torch_adapter_itself_refuses_xla_which_its_for_mode_adapter_runs() -> None:
    adapter = frameworks.load("torch", frameworks.BUILTIN)
    assert "xla" in adapter.variants
    with pytest.raises(Unsupported, match="torch has no xla variant"):
        adapter.compile(lambda x: x, "xla")
    assert adapter.for_mode("eager") is adapter and adapter.for_mode("jit") is adapter


def test_a_torch_xla_that_does_not_import_leaves_torch_running_and_its_cases_skip(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """torch_xla built against another torch fails to import ("undefined symbol"): the
    worker's start goes on, and an xla case skips saying why and naming the job."""
    import sys

    from pytest_mlbench.errors import Unavailable
    from pytest_mlbench.frameworks.torch_ import TorchAdapter
    from pytest_mlbench.frameworks.torch_xla_ import TorchXla

    monkeypatch.setitem(sys.modules, "torch_xla", None)  # its import raises ImportError
    for name in ("PJRT_DEVICE", "NPROC", "XLA_PERSISTENT_CACHE_PATH"):  # restored after
        monkeypatch.delenv(name, raising=False)
    xla = TorchXla(TorchAdapter())
    xla.start()
    with pytest.raises(Unavailable, match=r"torch's xla mode needs a torch_xla that imports "
                                          r"\(.*\): " + JOB):
        xla.setup("cpu", POLICIES["fp32"], 0)


# -- with torch_xla -----------------------------------------------------------------------------

def xla_adapter(precision: str = "fp32") -> Any:
    adapter = frameworks.load("torch", frameworks.BUILTIN)
    adapter.set_threads(1)
    xla = adapter.for_mode("xla")
    xla.setup("cpu", POLICIES[precision], 0)
    return xla


@needs_xla
@pytest.mark.parametrize("precision", ["fp32", "fp64", "bf16"])
def test_round_trip_through_the_xla_device_keeps_bytes_and_dtype(precision: str) -> None:
    adapter = xla_adapter(precision)
    array = np.linspace(-1, 1, 12).reshape(3, 4).astype(numpy_dtype(POLICIES[precision]))
    on_device = adapter.asarray(array)
    assert on_device.device.type == "xla" and adapter.on_device(on_device)
    assert dtype_name(on_device) == POLICIES[precision].dtype
    back = adapter.to_numpy(on_device)
    assert back.dtype == array.dtype and back.tobytes() == array.tobytes()


@needs_xla
def test_the_step_compiles_once_and_a_new_shape_is_a_compilation_the_harness_counts() -> None:
    import torch

    adapter = xla_adapter()
    x = adapter.asarray(np.linspace(0, 1, 37).astype(np.float32))  # a shape no other test uses
    compiled = adapter.compile(lambda t: torch.tanh(t) * 3, "xla")
    assert compiled.traces() == 0
    for _ in range(3):
        adapter.sync(compiled(x))
    assert compiled.traces() == 1  # compiled on the first call only
    before = adapter.compile_events()
    adapter.sync(compiled(adapter.asarray(np.ones(38, np.float32))))  # a recompile
    assert adapter.compile_events() == before + 1 and compiled.traces() == 2


@needs_xla
def test_a_step_reading_a_value_on_the_host_fails() -> None:
    from pytest_mlbench.frameworks.torch_xla_ import HostCopy

    adapter = xla_adapter()
    x = adapter.asarray(np.ones(41, np.float32))

    def logs(t: Any) -> Any:
        y = t * 2
        float(y.sum())  # the step cut in two: its first half runs here
        return y + 1

    with pytest.raises(HostCopy, match="logs ran part of its graph before its end"):
        adapter.compile(logs, "xla")(x)


@needs_xla
def test_a_step_copying_device_data_to_the_host_fails() -> None:
    from pytest_mlbench.frameworks.torch_xla_ import HostCopy

    adapter = xla_adapter()
    x = adapter.asarray(np.ones(43, np.float32))

    def on_host(t: Any) -> Any:
        return (t.cpu() * 2).to(t.device)  # the work done on the host

    with pytest.raises(HostCopy, match=r"on_host copied 1 tensor\(s\) from the XLA device"):
        adapter.compile(on_host, "xla")(x)


@needs_xla
def test_a_tensor_still_pending_or_on_the_host_is_not_a_result_on_the_device() -> None:
    import torch

    adapter = xla_adapter()
    x = adapter.asarray(np.ones(47, np.float32))
    assert adapter.on_device(x)
    assert not adapter.on_device(x * 2)  # its graph not run: work owed
    assert not adapter.on_device(torch.ones(3))
    assert adapter.on_device(torch.tensor(5.0, dtype=torch.float64))  # Adam's count


@needs_xla
def test_xla_matmul_precision_changed_by_the_implementation_is_an_error() -> None:
    import torch_xla.backends

    adapter = xla_adapter()
    torch_xla.backends.set_mat_mul_precision("default")
    try:
        with pytest.raises(PolicyNotApplied, match="torch_xla's matmul precision is 'default'"):
            adapter.verify_policy(POLICIES["fp32"])
    finally:
        adapter.setup("cpu", POLICIES["fp32"], 0)
    adapter.verify_policy(POLICIES["fp32"])


@needs_xla
def test_xla_cpu_pool_is_held_to_the_session_threads() -> None:
    adapter = xla_adapter()
    assert adapter.pool is not None and adapter.pool <= 1


@needs_xla
def test_a_gpu_case_skips_saying_xla_cuda_is_gone() -> None:
    adapter = frameworks.load("torch", frameworks.BUILTIN).for_mode("xla")
    with pytest.raises(Unsupported, match="XLA:CUDA was deprecated in torch-xla 2.8 and "
                                          "removed in 2.9"):
        adapter.setup("gpu", POLICIES["fp32"], 0)


@needs_xla
def test_an_xla_backward_after_an_eager_one_in_the_same_worker() -> None:
    """torch's autograd engine sizes its device queues at a process's first backward: a
    worker's XLA device must exist by then (the adapter starts it with the worker's threads),
    or every later XLA backward fails torch's internal assert (engine.cpp)."""
    import subprocess
    import sys

    code = """
import torch
from pytest_mlbench import frameworks
from pytest_mlbench.precision import POLICIES
adapter = frameworks.load("torch", frameworks.BUILTIN)
adapter.set_threads(1)  # as a worker starts
w = torch.ones(3, requires_grad=True)
(w * 2).sum().backward()  # an eager case first
xla = adapter.for_mode("xla")
xla.setup("cpu", POLICIES["fp32"], 0)
v = xla.asarray(__import__("numpy").ones(3, "float32")).requires_grad_()
(v * 2).sum().backward()
print(xla.to_numpy(v.grad).tolist())
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0 and "[2.0, 2.0, 2.0]" in done.stdout, done.stderr[-2000:]
