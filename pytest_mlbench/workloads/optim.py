"""Optimizers as data: hyper-parameters, the float64 reference update, and the names of their
state, shared by every framework's implementation and every check.

Each framework runs its own optimizer (torch.optim, optax, keras.optimizers); this module says
what they must all compute, one algorithm per optimizer (tests/unit/builders/test_optimizer_algorithms.py
holds every framework's to this float64 update to 1e-12). The update rules are torch's and
optax's; Keras's Adam puts epsilon on sqrt(v) before the bias correction, so the Keras builder
gives it this step (builders/tensorflow_.py):

    sgd       p -= lr g
    momentum  b = mu b + g;  p -= lr b                         (torch.optim.SGD, optax.sgd,
                                                                Keras SGD: v = mu v - lr g)
    adam      m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  t += 1
              p -= lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
    adamw     p -= lr wd p, then the adam update (decoupled weight decay)

State is named ``<slot>.<param>`` (``m.w1``, ``v.w1``, ``momentum.w1``) plus ``count`` for Adam's
step counter, so every framework's state reads back into one dict the checks compare.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

Arrays = dict[str, np.ndarray]
NAMES = ("sgd", "momentum", "adam", "adamw")


@dataclass(frozen=True)
class Optimizer:
    name: str
    lr: float
    momentum: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        if self.name not in NAMES:
            raise ValueError(f"optimizer {self.name!r}: choose from {', '.join(NAMES)}")
        if not self.lr > 0:
            raise ValueError(f"optimizer {self.name}: lr must be positive, got {self.lr!r}")

    @property
    def hyperparameters(self) -> dict[str, float]:
        """The values every framework's optimizer must hold, by these names."""
        keys = {"sgd": ("lr",), "momentum": ("lr", "momentum"),
                "adam": ("lr", "b1", "b2", "eps"),
                "adamw": ("lr", "b1", "b2", "eps", "weight_decay")}[self.name]
        return {k: float(getattr(self, k)) for k in keys}

    @property
    def slots(self) -> tuple[str, ...]:
        """Per-parameter state slots."""
        return {"sgd": (), "momentum": ("momentum",), "adam": ("m", "v"),
                "adamw": ("m", "v")}[self.name]

    @property
    def counted(self) -> bool:
        return self.name in ("adam", "adamw")

    @property
    def step_bound(self) -> float | None:
        """For an optimizer that divides each element's step by that element's own gradient
        scale (Adam, AdamW), the most one element moves in one step whatever its gradient:
        lr (1 - b1) / sqrt(1 - b2) where that exceeds lr, else lr (Kingma and Ba, section
        2.1), weight decay aside (it does not depend on the gradient). None for the others,
        whose step is the gradient's scale."""
        if not self.counted:
            return None
        return self.lr * max(1.0, (1 - self.b1) / math.sqrt(1 - self.b2))

    def describe(self) -> str:
        return ", ".join(f"{k}={v:g}" for k, v in self.hyperparameters.items())

    def init_state(self, params: Mapping[str, np.ndarray]) -> Arrays:
        state = {f"{slot}.{k}": np.zeros_like(v, dtype=np.float64)
                 for slot in self.slots for k, v in params.items()}
        if self.counted:
            state["count"] = np.zeros((), dtype=np.float64)
        return state

    def update(self, params: Mapping[str, np.ndarray], grads: Mapping[str, np.ndarray],
               state: Mapping[str, np.ndarray]) -> tuple[Arrays, Arrays]:
        """One step in float64: (new params, new state)."""
        if self.name == "sgd":
            return {k: p - self.lr * grads[k] for k, p in params.items()}, dict(state)
        if self.name == "momentum":
            buf = {k: self.momentum * state[f"momentum.{k}"] + grads[k] for k in params}
            return ({k: p - self.lr * buf[k] for k, p in params.items()},
                    {f"momentum.{k}": b for k, b in buf.items()})
        return self._adam(params, grads, state)

    def _adam(self, params: Mapping[str, np.ndarray], grads: Mapping[str, np.ndarray],
              state: Mapping[str, np.ndarray]) -> tuple[Arrays, Arrays]:
        t = float(state["count"]) + 1
        new_state: Arrays = {"count": np.asarray(t)}
        out = {}
        for k, p in params.items():
            g = grads[k]
            m = self.b1 * state[f"m.{k}"] + (1 - self.b1) * g
            v = self.b2 * state[f"v.{k}"] + (1 - self.b2) * g * g
            new_state[f"m.{k}"], new_state[f"v.{k}"] = m, v
            if self.weight_decay:
                p = p - self.lr * self.weight_decay * p
            m_hat, v_hat = m / (1 - self.b1 ** t), v / (1 - self.b2 ** t)
            out[k] = p - self.lr * m_hat / (np.sqrt(v_hat) + self.eps)
        return out, new_state


def sgd(lr: float) -> Optimizer:
    return Optimizer("sgd", lr)


def momentum(lr: float, mu: float = 0.9) -> Optimizer:
    return Optimizer("momentum", lr, momentum=mu)


def adam(lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> Optimizer:
    return Optimizer("adam", lr, b1=b1, b2=b2, eps=eps)


def adamw(lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 0.01) -> Optimizer:
    return Optimizer("adamw", lr, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay)


def check_hyperparameters(found: Mapping[str, Any], expected: Optimizer, *, where: str) -> None:
    """The framework optimizer's own hyper-parameters equal the spec's (relative 1e-6: Keras
    keeps them as float32 variables)."""
    wanted = expected.hyperparameters
    missing = sorted(set(wanted) - set(found))
    if missing:
        raise AssertionError(f"{where}: the {expected.name} optimizer does not report "
                             f"{', '.join(missing)}; cannot verify its hyper-parameters")
    wrong = {k: (float(found[k]), v) for k, v in wanted.items()
             if not np.isclose(float(found[k]), v, rtol=1e-6, atol=0.0)}
    if wrong:
        detail = ", ".join(f"{k}={a:g} (spec {e:g})" for k, (a, e) in sorted(wrong.items()))
        raise AssertionError(f"{where}: optimizer hyper-parameters differ from the spec: "
                             f"{detail}")
