"""The CNN in JAX: lax.conv_general_dilated (NHWC, HWIO kernels) and lax.reduce_window max;
variant jit+flax is the same model as a Flax Linen module (nn.Conv, nn.max_pool, nn.Dense),
the layer library a JAX user writes it with, its variables the spec's weights (Linen's Conv
kernel is HWIO and its Dense kernel (in, out): the spec's layouts)."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import lax

from pytest_mlbench.builders import functional


def conv3x3(x: Any, k: Any, bias: Any) -> Any:
    out = lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                   dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return out + bias


def maxpool2(x: Any) -> Any:
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    h = maxpool2(jax.nn.relu(conv3x3(data["x"], p["k1"], p["c1"])))
    h = maxpool2(jax.nn.relu(conv3x3(h, p["k2"], p["c2"])))
    return h.reshape(h.shape[0], -1) @ p["w"] + p["b"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    log_probs = jax.nn.log_softmax(forward(p, data), axis=-1)
    return -jnp.mean(jnp.sum(data["y"] * log_probs, axis=-1))


class CNN(nn.Module):
    """Two 3x3 convolutions with ReLU and 2x2 max-pooling, then the dense head; dtype None:
    each layer computes at its inputs' and parameters' dtype, as the policy cast them."""

    channels: tuple[int, int]
    classes: int

    @nn.compact
    def __call__(self, x: Any) -> Any:
        for i, features in enumerate(self.channels):
            x = nn.Conv(features, (3, 3), padding="SAME", name=f"conv{i + 1}")(x)
            x = nn.max_pool(nn.relu(x), (2, 2), strides=(2, 2))
        return nn.Dense(self.classes, name="head")(x.reshape(x.shape[0], -1))


LINEN = {"conv1": ("k1", "c1"), "conv2": ("k2", "c2"), "head": ("w", "b")}


def to_variables(p: dict[str, Any]) -> dict[str, Any]:
    return {"params": {layer: {"kernel": p[k], "bias": p[b]} for layer, (k, b) in LINEN.items()}}


def from_variables(v: dict[str, Any]) -> dict[str, Any]:
    params = v["params"]
    return {name: params[layer][part] for layer, names in LINEN.items()
            for name, part in zip(names, ("kernel", "bias"), strict=True)}


def flax_forward(v: dict[str, Any], data: dict[str, Any]) -> Any:
    params = v["params"]
    model = CNN((params["conv1"]["kernel"].shape[-1], params["conv2"]["kernel"].shape[-1]),
                params["head"]["kernel"].shape[-1])
    return model.apply(v, data["x"])


def flax_loss(v: dict[str, Any], data: dict[str, Any]) -> Any:
    log_probs = jax.nn.log_softmax(flax_forward(v, data), axis=-1)
    return -jnp.mean(jnp.sum(data["y"] * log_probs, axis=-1))


build = functional.jax(forward, loss,
                       idioms={"flax": (flax_forward, flax_loss, to_variables, from_variables)})
