"""TensorFlow: eager, tf.function (graph) and tf.function(jit_compile=True) (XLA)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_mlbench.errors import PolicyNotApplied, Unavailable, Unsupported
from pytest_mlbench.frameworks.base import Compiled, package_versions
from pytest_mlbench.precision import Policy

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TF's start-up banner out of reports


class TensorflowAdapter:
    name = "tensorflow"
    modules: tuple[str, ...] = ("tensorflow",)
    extra = "tensorflow"
    variants: tuple[str, ...] = ("eager", "jit", "xla")

    def __init__(self) -> None:
        self._device = "/CPU:0"

    def devices(self) -> dict[str, str]:
        import tensorflow as tf

        out = {"cpu": "host CPU"}
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            out["gpu"] = f"{len(gpus)} x {gpus[0].name}"
        return out

    def setup(self, device: str, policy: Policy, seed: int) -> None:
        import tensorflow as tf

        if device not in self.devices():
            raise Unavailable(f"no {device} visible to tensorflow (list_physical_devices is empty)")
        if policy.gpu_only and device != "gpu":
            raise Unsupported(f"{policy.name} applies to NVIDIA GPUs only")
        self._device = "/GPU:0" if device == "gpu" else "/CPU:0"
        tf.config.experimental.enable_tensor_float_32_execution(policy.allow_tf32)
        if tf.config.experimental.tensor_float_32_execution_enabled() != policy.allow_tf32:
            raise PolicyNotApplied(f"tensorflow TF32 is not {'on' if policy.allow_tf32 else 'off'}")
        tf.random.set_seed(seed)

    def asarray(self, array: np.ndarray) -> Any:
        import tensorflow as tf

        with tf.device(self._device):
            if str(array.dtype) == "bfloat16":
                return tf.cast(tf.constant(array.astype(np.float32)), tf.bfloat16)
            return tf.constant(array)

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value.numpy())

    def sync(self, value: Any) -> None:
        # Reading a result back is TF's only portable barrier; steps return a scalar loss.
        import tensorflow as tf

        for leaf in tf.nest.flatten(value):
            leaf.numpy()

    def compile(self, fn: Callable[..., Any], variant: str) -> Compiled:
        import tensorflow as tf

        if variant == "eager":
            return Compiled(fn, variant, name=getattr(fn, "__name__", ""))
        if variant not in ("jit", "xla"):
            raise Unsupported(f"tensorflow has no {variant} variant")
        graph = tf.function(fn, jit_compile=variant == "xla", reduce_retracing=False)
        return Compiled(graph, variant, traces=graph.experimental_get_tracing_count,
                        name=getattr(fn, "__name__", ""))

    def device_scope(self) -> Any:
        import tensorflow as tf

        return tf.device(self._device)

    def peak_memory(self, run: Callable[[], None]) -> tuple[int, str] | None:
        import tensorflow as tf

        device = self._device.strip("/")
        try:
            tf.config.experimental.reset_memory_stats(device)
        except ValueError:
            return None
        run()
        peak = tf.config.experimental.get_memory_info(device)["peak"]
        return (int(peak), "step") if peak else None  # 0 on CPU: not tracked

    def versions(self) -> dict[str, str]:
        return package_versions("tensorflow-cpu", "tensorflow", "keras")

    def threads(self) -> dict[str, Any]:
        import tensorflow as tf

        return {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                "inter_op": tf.config.threading.get_inter_op_parallelism_threads()}
