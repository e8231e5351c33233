"""Seed MLP with torch.nn layers and torch.optim.SGD, eager or with the step under torch.compile.

nn.Linear stores its weight as (out, in) and computes x @ weight.T, so the spec's matmul
weights are copied in transposed and read back transposed."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

LAYERS = {"w1": 0, "w2": 2}  # spec name -> index of its Linear in the Sequential


def make_model(w1: torch.Tensor, w2: torch.Tensor) -> nn.Sequential:
    (n_in, hidden), n_out = w1.shape, w2.shape[1]
    model = nn.Sequential(nn.Linear(n_in, hidden, bias=False), nn.Tanh(),
                          nn.Linear(hidden, n_out, bias=False))
    model.to(device=w1.device, dtype=w1.dtype)
    with torch.no_grad():  # the seeded start, not torch's own initialisation
        model[LAYERS["w1"]].weight.copy_(w1.T)
        model[LAYERS["w2"]].weight.copy_(w2.T)
    return model


class Trainer:
    make_model = staticmethod(make_model)

    def __init__(self, case: Any) -> None:
        self.model = self.make_model(case.params["w1"], case.params["w2"])
        self.batch = case.batch  # the step's batch: read at every step
        self.opt = torch.optim.SGD(self.model.parameters(), lr=case.learning_rate)
        self.bce = nn.BCEWithLogitsLoss()  # mean of softplus(z) - y z, as the spec's loss
        # mixed precision (the amp policy): the forward under torch.autocast, as torch.nn
        # code trains in bfloat16; parameters, gradients and SGD stay float32
        self.autocast = torch.autocast(case.params["w1"].device.type,
                                       dtype=getattr(torch, case.policy.compute or "bfloat16"),
                                       enabled=case.policy.mixed)
        # The whole step, backward and optimizer included: dynamo traces it as one graph.
        self.train_step = case.compile(self._train_step)

    def _forward_backward(self) -> torch.Tensor:
        self.opt.zero_grad(set_to_none=True)
        with self.autocast:
            logits = self.model(self.batch()["x"])
        loss = self.bce(logits.float(), self.batch()["y"])
        loss.backward()
        return loss.detach()

    def _train_step(self) -> torch.Tensor:
        loss = self._forward_backward()
        self.opt.step()
        return loss

    def params(self) -> dict[str, torch.Tensor]:
        return {k: self.model[i].weight.detach().T for k, i in LAYERS.items()}

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        # Eager even for jit: the compiled step's numerics are what the trajectory check
        # compares, and a second torch.compile for this one call would double compile time.
        loss = self._forward_backward()
        return loss, {k: self.model[i].weight.grad.T for k, i in LAYERS.items()}

    def step(self) -> Any:
        return self.train_step()


def build(case: Any) -> Trainer:
    return Trainer(case)
