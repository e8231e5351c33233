"""Seed MLP with Keras Dense layers and keras.optimizers.SGD on the TensorFlow backend: eager,
tf.function or tf.function(jit_compile=True). The Dense kernel is (in, out), the spec's layout.
Mixed precision is Keras's own: a ``mixed_bfloat16`` or ``mixed_float16`` dtype policy, and
under amp16 keras.optimizers.LossScaleOptimizer as its custom training loops use it.

Keras keeps its learning rate in a variable of its floatx (float32 by default): an fp64 run
made under the default would step with float32(1e-2), 2e-8 away relatively, another learning
rate than the other frameworks'. The optimizer is made with floatx float64 for fp64 cases."""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # before keras is first imported

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from pytest_mlbench.builders.tensorflow_ import loss_scaled  # noqa: E402

LAYERS = {"w1": 0, "w2": 1}  # spec name -> index of its Dense layer


def make_model(w1: Any, w2: Any, compute: str = "") -> keras.Sequential:
    """A Keras dtype policy per layer: float64 must not become float32; under a mixed policy
    Keras's own ``mixed_bfloat16`` (amp) or ``mixed_float16`` (amp16): float32 variables,
    ``compute`` arithmetic."""
    dtype = w1.dtype.name
    layer = f"mixed_{compute}" if compute else dtype
    model = keras.Sequential([
        keras.Input((w1.shape[0],), dtype=dtype),
        keras.layers.Dense(w1.shape[1], use_bias=False, activation="tanh", dtype=layer),
        keras.layers.Dense(w2.shape[1], use_bias=False, dtype=layer),
    ])
    for key, i in LAYERS.items():  # the seeded start, not Keras's own initialisation
        model.layers[i].kernel.assign({"w1": w1, "w2": w2}[key])
    return model


def sgd(lr: float, dtype: str) -> keras.optimizers.SGD:
    """Keras SGD whose learning-rate variable is float64 in a float64 case, float32 otherwise
    (a bfloat16 variable would make 1e-2 into 0.00999)."""
    before = keras.config.floatx()
    keras.config.set_floatx("float64" if dtype == "float64" else "float32")
    try:
        return keras.optimizers.SGD(learning_rate=lr)
    finally:
        keras.config.set_floatx(before)


class Trainer:
    make_model = staticmethod(make_model)

    def __init__(self, case: Any) -> None:
        if keras.backend.backend() != "tensorflow":
            raise RuntimeError(f"keras runs on {keras.backend.backend()}, not tensorflow: "
                               "unset KERAS_BACKEND")
        with case.adapter.device_scope():
            self.model = self.make_model(case.params["w1"], case.params["w2"],
                                         case.policy.compute if case.policy.mixed else "")
            self.opt = loss_scaled(sgd(case.learning_rate, case.dtype), case.policy)
            self.opt.build(self.model.trainable_variables)  # its variables, outside any trace
        self.bce = keras.losses.BinaryCrossentropy(from_logits=True, dtype=case.dtype)
        self.batch = case.batch  # the step's batch: read at every step
        self.grads = case.compile(self._loss_and_grads)
        self.sgd_step = case.compile(self._sgd_step)

    def _scaled_loss_and_grads(self, x: Any, y: Any) -> Any:
        """The loss and the gradients of opt.scale_loss(loss) (the loss itself but under
        LossScaleOptimizer)."""
        with tf.GradientTape() as tape:
            loss = self.bce(y, self.model(x, training=True))
            scaled = self.opt.scale_loss(loss)
        return loss, tape.gradient(scaled, self.model.trainable_variables)

    def _loss_and_grads(self, x: Any, y: Any) -> Any:
        """The loss and its gradients, unscaled as LossScaleOptimizer's apply unscales them."""
        loss, grads = self._scaled_loss_and_grads(x, y)
        if isinstance(self.opt, keras.optimizers.LossScaleOptimizer):
            grads = [keras.ops.divide(g, self.opt.dynamic_scale) for g in grads]
        return loss, grads

    def _sgd_step(self, x: Any, y: Any) -> Any:
        loss, grads = self._scaled_loss_and_grads(x, y)
        self.opt.apply(grads, self.model.trainable_variables)
        return loss

    def _kernels(self) -> dict[str, Any]:
        return {k: self.model.layers[i].kernel for k, i in LAYERS.items()}

    def params(self) -> dict[str, Any]:
        return {k: v.value for k, v in self._kernels().items()}

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        loss, grads = self.grads(self.batch()["x"], self.batch()["y"])
        by_variable = {id(v): g for v, g in zip(self.model.trainable_variables, grads, strict=True)}
        return loss, {k: by_variable[id(v)] for k, v in self._kernels().items()}

    def step(self) -> Any:
        return self.sgd_step(self.batch()["x"], self.batch()["y"])

    def loss_scale(self) -> Any:
        """LossScaleOptimizer's dynamic scale now; None where no loss is scaled."""
        scale = getattr(self.opt, "dynamic_scale", None)
        return None if scale is None else tf.convert_to_tensor(scale)


def build(case: Any) -> Trainer:
    return Trainer(case)
