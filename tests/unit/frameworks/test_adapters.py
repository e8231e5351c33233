"""Adapters: round trips keep bytes and dtype, variants count their compilations, and a
precision policy that does not take effect is an error, never a quiet downgrade."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pytest_mlbench import frameworks
from pytest_mlbench.errors import PolicyNotApplied, Unavailable, Unsupported
from pytest_mlbench.precision import POLICIES, dtype_name, numpy_dtype

INSTALLED = [name for name in frameworks.BUILTIN
             if frameworks.missing_reason(name, frameworks.BUILTIN) is None]


def adapter_for(name: str, precision: str = "fp32") -> Any:
    adapter = frameworks.load(name, frameworks.BUILTIN)
    adapter.setup("cpu", POLICIES[precision], 0)
    return adapter


@pytest.mark.parametrize("name", INSTALLED)
@pytest.mark.parametrize("precision", ["fp32", "fp64", "bf16"])
def test_round_trip_keeps_bytes_and_dtype(name: str, precision: str) -> None:
    try:
        adapter = adapter_for(name, precision)
    except Unsupported as exc:
        assert precision == "bf16" and "bfloat16" in str(exc)
        return
    array = np.linspace(-1, 1, 12).reshape(3, 4).astype(numpy_dtype(POLICIES[precision]))
    back = adapter.to_numpy(adapter.asarray(array))
    assert back.dtype == array.dtype and back.tobytes() == array.tobytes()
    assert dtype_name(adapter.asarray(array)) == POLICIES[precision].dtype


@pytest.mark.parametrize("name", [n for n in INSTALLED if n in ("jax", "tensorflow", "torch")])
def test_compiled_variant_counts_traces(name: str) -> None:
    adapter = adapter_for(name)
    compiled = adapter.compile(lambda x: x * 2, "jit")
    assert compiled.traces() == 0
    x = adapter.asarray(np.ones(4, np.float32))
    adapter.sync(compiled(x))
    adapter.sync(compiled(x))
    assert compiled.traces() == 1


@pytest.mark.skipif("tensorflow" not in INSTALLED, reason="tensorflow is not installed")
def test_tensorflow_reads_variables_together_as_they_are_now_and_counts_no_compilation() -> None:
    """to_numpy_tree reads a mapping's variables through one function of the harness's (a
    variable read alone is an op of its own, 100 us and more): the same bytes as to_numpy,
    each variable's value at the time of the read (never one captured when traced), and
    its trace is not the implementation's compilation."""
    import tensorflow as tf

    from pytest_mlbench.engine import runners

    adapter = adapter_for("tensorflow")
    tree = {"w": tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3)),
            "b": tf.Variable(np.ones(3, np.float32)),
            "t": tf.constant(np.full(2, 7.0, np.float32))}
    before, readers = adapter.compile_events(), {}
    for _ in range(2):
        found = runners.tree_to_numpy(adapter, tree, readers)
        assert {k: v.tobytes() for k, v in found.items()} == {
            k: adapter.to_numpy(v).tobytes() for k, v in tree.items()}
        tree["w"].assign_add(tf.ones((2, 3)))
    assert runners.tree_to_numpy(adapter, tree, readers)["w"][0, 0] == 2.0
    assert adapter.compile_events() == before and len(readers) == 1
    # the census of an implementation that holds the adapter sees no reader's variables
    assert adapter.census({"adapter": adapter}) is None
    graph = adapter.compile(tf.function(lambda x: x + 1), "jit")
    graph(tf.constant(1.0))
    assert adapter.compile_events() > before


@pytest.mark.skipif("torch" not in INSTALLED, reason="torch is not installed")
def test_a_second_torch_case_set_up_keeps_the_first_cases_compiled_step() -> None:
    """Two compiled cases of one group in one worker (gpt's jit and jit+sdpa) are both built
    before either is timed: the second's setup must not drop the first's code, which would
    then compile again inside its timed rounds (fail_on_recompile, the guard the timed
    region runs under)."""
    import torch

    class Step:  # one code object for both cases, as the builders' Trainer._train_step
        def __init__(self, k: float) -> None:
            self.k = k

        def run(self, x: Any) -> Any:
            return torch.tanh(x) * self.k

    adapter = adapter_for("torch")
    first = adapter.compile(Step(2.0).run, "jit")
    first(torch.ones(4))
    adapter.setup("cpu", POLICIES["fp32"], 0)  # the second case's
    second = adapter.compile(Step(3.0).run, "jit")
    second(torch.ones(4))
    with first.guard():
        assert float(first(torch.ones(4))[0]) == pytest.approx(2 * np.tanh(1.0), rel=1e-6)
    with second.guard():
        second(torch.ones(4))
    assert (first.traces(), second.traces()) == (1, 1)


@pytest.mark.skipif("torch" not in INSTALLED, reason="torch is not installed")
def test_torch_builds_its_precompiled_header_in_the_shared_compile_cache(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """inductor's ~150 MB precompiled header goes where the rest of its cache goes, so the
    sessions of a test run that share a compile cache build it once (inductor's own place
    is under each session's temporary folder, and /tmp in a process that has no other)."""
    from torch._inductor import codecache

    monkeypatch.setattr(codecache, "_HEADER_DIR", codecache._HEADER_DIR)
    monkeypatch.setattr(codecache, "_HEADER_LOCK_DIR", codecache._HEADER_LOCK_DIR)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    adapter_for("torch").compile(lambda x: x * 2, "jit")
    assert codecache._HEADER_DIR == str(tmp_path / "cache" / "precompiled_headers")
    assert codecache._HEADER_LOCK_DIR == str(tmp_path / "cache" / "precompiled_headers" / "locks")


def test_jax_counts_every_compilation_and_only_the_implementations_own_as_its_jit() -> None:
    """Eager dispatch compiling a primitive for each new Python value is a compilation (it
    may not happen while timed) but not the implementation's jit; a jitted helper of optax's
    (Adam's bias correction) is the library's as shipped; a jax.jit of its own is its jit."""
    jax = pytest.importorskip("jax")
    optax = pytest.importorskip("optax")
    adapter = adapter_for("jax")
    x = adapter.asarray(np.linspace(1, 2, 7).astype(np.float32))  # a shape no other test uses
    own, every = adapter.compile_events(), adapter.backend_compiles()
    for power in (37, 38, 39):  # x ** int: integer_pow with the power as a static parameter
        adapter.sync(x ** power)
    assert (adapter.compile_events(), adapter.backend_compiles()) == (own, every + 3)
    tx = optax.adam(1e-3)
    adapter.sync(tx.update(x, tx.init(x), x)[0])
    assert adapter.backend_compiles() > every + 3  # optax compiled something of its own
    assert adapter.compile_events() == own
    adapter.sync(jax.jit(lambda y: y * 3)(x))
    assert adapter.compile_events() == own + 1


# (torch's xla: its own adapter, tests/unit/frameworks/test_torch_xla.py)
@pytest.mark.parametrize("name", [n for n in INSTALLED if n not in ("tensorflow", "torch")])
def test_unknown_variant_is_unsupported(name: str) -> None:
    adapter = adapter_for(name)
    assert "xla" not in adapter.variants
    with pytest.raises(Unsupported, match=f"{name} has no xla variant"):
        adapter.compile(lambda x: x, "xla")


def test_jax_fp64_that_does_not_take_effect_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    jax = pytest.importorskip("jax")
    adapter = adapter_for("jax", "fp32")  # x64 off
    real_update = jax.config.update
    monkeypatch.setattr(jax.config, "update",
                        lambda key, value: None if key == "jax_enable_x64" else real_update(key, value))
    with pytest.raises(PolicyNotApplied, match="jax made float32 from float64 input"):
        adapter.setup("cpu", POLICIES["fp64"], 0)


def test_torch_tf32_left_on_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    adapter = adapter_for("torch", "fp32")
    torch.set_float32_matmul_precision("high")
    monkeypatch.setattr(torch, "set_float32_matmul_precision", lambda value: None)
    with pytest.raises(PolicyNotApplied, match="torch float32 matmul precision is high, the fp32 "
                                               "policy needs highest"):
        adapter.setup("cpu", POLICIES["fp32"], 0)
    monkeypatch.undo()
    torch.set_float32_matmul_precision("highest")


def _toggle_tf32(name: str) -> None:
    """On and off again, as a step that hides TF32 from a check of the current values would."""
    if name == "torch":
        import torch

        torch.set_float32_matmul_precision("high")
        torch.set_float32_matmul_precision("highest")
    elif name == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(True)
        tf.config.experimental.enable_tensor_float_32_execution(False)
    else:
        import jax

        with jax.default_matmul_precision("tensorfloat32"):
            pass


@pytest.mark.parametrize("name", [n for n in INSTALLED if n in ("jax", "tensorflow", "torch")])
def test_precision_switched_and_restored_after_setup_is_an_error(name: str) -> None:
    adapter = adapter_for(name, "fp32")
    adapter.verify_policy(POLICIES["fp32"])
    _toggle_tf32(name)
    with pytest.raises(PolicyNotApplied, match=f"{name} precision settings were changed while "
                                               r"the case ran \(\d call\(s\): "):
        adapter.verify_policy(POLICIES["fp32"])
    adapter.setup("cpu", POLICIES["fp32"], 0)  # the next case starts clean
    adapter.verify_policy(POLICIES["fp32"])


def test_jax_x64_switched_on_in_an_fp32_case_is_an_error() -> None:
    jax = pytest.importorskip("jax")
    adapter = adapter_for("jax", "fp32")
    jax.config.update("jax_enable_x64", True)
    try:
        with pytest.raises(PolicyNotApplied, match="jax_enable_x64 is True, the fp32 policy "
                                                   "needs False"):
            adapter.verify_policy(POLICIES["fp32"])
    finally:
        adapter.setup("cpu", POLICIES["fp32"], 0)


@pytest.mark.parametrize("name", [n for n in INSTALLED if n in ("jax", "tensorflow", "torch")])
def test_absent_gpu_is_unavailable_with_reason(name: str) -> None:
    adapter = frameworks.load(name, frameworks.BUILTIN)
    if "gpu" in adapter.devices():
        pytest.skip("this machine has a GPU")
    with pytest.raises(Unavailable, match=f"no gpu visible to {name}"):
        adapter.setup("gpu", POLICIES["fp32"], 0)


@pytest.mark.parametrize("name", ["numpy", "numba", "autograd"])
def test_cpu_only_frameworks_refuse_gpu_and_tf32(name: str) -> None:
    if name not in INSTALLED:
        pytest.skip(f"{name} not installed")
    adapter = frameworks.load(name, frameworks.BUILTIN)
    with pytest.raises(Unsupported, match="runs on the CPU only"):
        adapter.setup("gpu", POLICIES["fp32"], 0)
    with pytest.raises(Unsupported, match="tf32 applies to NVIDIA GPUs only"):
        adapter.setup("cpu", POLICIES["tf32"], 0)


def test_versions_and_threads_are_reported() -> None:
    for name in INSTALLED:
        adapter = adapter_for(name)
        assert adapter.versions(), name
        assert isinstance(adapter.threads(), dict)


def test_numpy_peak_memory_sees_a_step_allocation() -> None:
    adapter = adapter_for("numpy")
    found = adapter.peak_memory(lambda: np.ones(1_000_000).sum())
    assert found is not None and found[0] >= 8_000_000 and found[1] == "step"


@pytest.mark.parametrize("name", [n for n in INSTALLED if n in ("jax", "tensorflow", "torch", "numba")])
def test_frameworks_without_cpu_memory_counters_say_none(name: str) -> None:
    adapter = adapter_for(name)
    ran = []
    assert adapter.peak_memory(lambda: ran.append(1)) is None
    assert ran in ([], [1])  # may or may not have run the step; never invents a figure


def test_torch_gpu_path_selects_cuda_and_synchronises(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU here: fake CUDA's presence to check the GPU path picks cuda and that sync waits
    on it (a timing without torch.cuda.synchronize would measure launches, not work)."""
    torch = pytest.importorskip("torch")
    adapter = frameworks.load("torch", frameworks.BUILTIN)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "Fake GPU")
    synced: list[Any] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synced.append(device))
    assert adapter.devices()["gpu"] == "1 x Fake GPU"
    adapter.setup("gpu", POLICIES["tf32"], 0)
    assert torch.get_float32_matmul_precision() == "high"
    adapter.sync(None)
    assert synced == [torch.device("cuda")]
    adapter.setup("cpu", POLICIES["fp32"], 0)
    adapter.sync(None)
    assert len(synced) == 1  # the CPU path does not wait on CUDA
