"""Seed MLP with torch.nn layers and torch.optim.SGD, eager or with the step under torch.compile.

nn.Linear stores its weight as (out, in) and computes x @ weight.T, so the spec's matmul
weights are copied in transposed and read back transposed."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from pytest_mlbench.precision import BACKOFF, GROWTH, GROWTH_INTERVAL

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
        # mixed precision (the amp and amp16 policies): the forward under torch.autocast, as
        # torch.nn code trains in bfloat16 or float16; parameters, gradients and SGD stay float32
        device = case.params["w1"].device.type
        self.autocast = torch.autocast(device,
                                       dtype=getattr(torch, case.policy.compute or "bfloat16"),
                                       enabled=case.policy.mixed)
        # loss scaling (the amp16 policy), as torch users write it: GradScaler scales the loss,
        # steps in SGD's place (skipping a step whose gradients overflowed) and keeps the scale;
        # disabled (a pass-through, scale 1) for every other policy
        self.scaler = torch.amp.GradScaler(device, init_scale=case.policy.loss_scale or 1.0,
                                           growth_factor=GROWTH, backoff_factor=BACKOFF,
                                           growth_interval=GROWTH_INTERVAL,
                                           enabled=bool(case.policy.loss_scale))
        # The whole step, backward and optimizer included: dynamo traces it as one graph
        # (under amp16 the GradScaler calls break it: dynamo runs torch.amp's code eagerly).
        self.train_step = case.compile(self._train_step)

    def _forward_backward(self) -> torch.Tensor:
        self.opt.zero_grad(set_to_none=True)
        with self.autocast:
            logits = self.model(self.batch()["x"])
        loss = self.bce(logits.float(), self.batch()["y"])
        self.scaler.scale(loss).backward()
        return loss.detach()

    def _train_step(self) -> torch.Tensor:
        loss = self._forward_backward()
        self.scaler.step(self.opt)
        self.scaler.update()
        return loss

    def params(self) -> dict[str, torch.Tensor]:
        return {k: self.model[i].weight.detach().T for k, i in LAYERS.items()}

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        # Eager even for jit: the compiled step's numerics are what the trajectory check
        # compares, and a second torch.compile for this one call would double compile time.
        # The scaled backward's gradients divided by the scale (exact: a power of two), as
        # scaler.unscale_ would, without recording this step in the scaler's state.
        loss = self._forward_backward()
        scale = self.scaler.get_scale()
        return loss, {k: self.model[i].weight.grad.T / scale for k, i in LAYERS.items()}

    def step(self) -> Any:
        return self.train_step()

    def loss_scale(self) -> torch.Tensor | None:
        """GradScaler's scale now; None where no loss is scaled (the scaler is off)."""
        return torch.tensor(self.scaler.get_scale()) if self.scaler.is_enabled() else None


def build(case: Any) -> Trainer:
    return Trainer(case)
