"""PyTorch: training through torch.optim on nn.Parameters (backward, then opt.step; the jit
variant compiles that whole step under torch.compile; a loss-scaling policy's through
torch.amp.GradScaler), inference, and torch.func's jvp / vjp / jvp-of-grad / vmap(jacfwd |
jacrev) on plain tensors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from pytest_mlbench import precision
from pytest_mlbench.builders.model import (
    NEEDS,
    Inference,
    Model,
    Transform,
    canonical_state,
    hyper,
    leaves,
    mixed_model,
    one_example,
    split_inputs,
    tree_map,
)
from pytest_mlbench.errors import Unsupported


def build(model: Model, case: Any) -> Any:
    name = model.need(case)
    kinds = {"train": ScaledTrainer if case.policy.loss_scale else Trainer,
             "infer": Inference, "jvp": Jvp, "vjp": Vjp, "hvp": Hvp,
             "jacfwd": Jacobian, "jacrev": Jacobian}
    mixed = mixed_model(model, case, lambda fn: autocast(fn, case.policy))
    if mixed is not model:
        runs_at_compute(mixed.fn(NEEDS[name]), mixed.tree(case.params), case)
    return kinds[name](mixed, case)


def autocast(fn: Callable[..., Any], policy: Any) -> Callable[..., Any]:
    """``fn`` under torch.autocast at the policy's compute dtype, on the device its
    parameters are on: torch's mixed precision, as its users write it (matmuls, convolutions
    and their gradients at bfloat16, reductions and losses where autocast keeps float32; the
    parameters, their gradients and the optimizer at float32). The result is float32."""
    dtype = getattr(torch, policy.compute)

    def mixed(p: Any, data: Any) -> Any:
        device = leaves(p)[0].device.type
        with torch.autocast(device_type=device, dtype=dtype):
            out = fn(p, data)
        return out.float()

    return mixed


# what torch says where a CPU kernel has no float16 (oneDNN's LSTM on a CPU without native
# float16 arithmetic: mkldnn_rnn_layer, which CPU autocast runs at float16)
NO_HALF = ("could not create a primitive descriptor", "not implemented for 'Half'")


def runs_at_compute(fn: Callable[..., Any], p: Any, case: Any) -> None:
    """Run the autocast ``fn`` once, untimed, where torch's CPU kernels may lack the policy's
    compute dtype, so that a case whose ops have none is skipped with torch's reason at
    build rather than failing its first step."""
    if case.policy.compute != "float16" or leaves(p)[0].device.type != "cpu":
        return
    try:
        with torch.no_grad():
            fn(p, case.data)
    except RuntimeError as exc:
        reason = str(exc).splitlines()[0].split(". ")[0]  # oneDNN's first sentence
        if not any(marker in reason for marker in NO_HALF):
            raise
        raise Unsupported(f"torch {torch.__version__}'s CPU autocast cannot run this model at "
                          f"float16: {reason}") from exc


def optimizer(opt: Any, params: list[Any]) -> torch.optim.Optimizer:
    """The spec's optimizer as torch.optim's own."""
    if opt.name in ("sgd", "momentum"):
        sgd = torch.optim.SGD(params, lr=opt.lr, momentum=opt.momentum)
        if opt.momentum:
            momentum_from_zeros(sgd)
        return sgd
    kind = torch.optim.Adam if opt.name == "adam" else torch.optim.AdamW
    extra = {"weight_decay": opt.weight_decay} if opt.name == "adamw" else {}
    built = kind(params, lr=opt.lr, betas=(opt.b1, opt.b2), eps=opt.eps, **extra)
    count_in_float64(built)
    return built


def momentum_from_zeros(opt: torch.optim.Optimizer) -> None:
    """SGD's momentum buffers made before the first step, at zero, as the spec's state starts.

    torch makes a buffer lazily, the first step's a copy of the gradient; under torch.compile
    the first step is then traced without buffers and the second with them, so the whole
    optimizer step compiled twice (guard ``len(self.state[...]) != 0``; cnn's and
    mlp_optim's momentum cases; docs/journal/2026-11-28-test-line-compile.md). From zero the
    first step's ``buf.mul_(momentum).add_(grad)`` is the gradient exactly (0 * momentum is
    0, 0 + g is g; dampening is 0), and every later step is torch's own as before."""
    for group in opt.param_groups:
        for p in group["params"]:
            opt.state[p] = {"momentum_buffer": torch.zeros_like(
                p, memory_format=torch.preserve_format)}


def count_in_float64(opt: torch.optim.Optimizer) -> None:
    """Adam's state as torch's lazy initialisation makes it, but its step count in float64.

    torch keeps ``step`` in float32 unless the default dtype is float64. Eager, the bias
    corrections read it back as a Python float (float64 arithmetic); under torch.compile they
    are tensor ops on the float32 count, so 1 - 0.999**t is rounded to float32 and the first
    step moves 1e-6 away from eager's and the spec's: a float64 case no longer runs the spec's
    algorithm. A float64 count gives compiled and eager the same bias corrections."""
    for group in opt.param_groups:
        for p in group["params"]:
            opt.state[p] = {
                "step": torch.tensor(0.0, dtype=torch.float64, device="cpu"),  # as torch hosts it
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
            }


class Trainer:
    """Parameters live in the model's tree as nn.Parameters; gradients arrive by backward()
    (or, given value_and_grad, are assigned to .grad) and torch.optim takes the step."""

    def __init__(self, model: Model, case: Any) -> None:
        self.model, self.data, self.opt_spec = model, case.data, case.optimizer
        self.p = tree_map(lambda t: torch.nn.Parameter(t.detach().clone()), model.tree(case.params))
        self.leaves = leaves(self.p)
        self.opt = optimizer(case.optimizer, self.leaves)
        self.train_step = case.compile(self._train_step)

    def _forward_backward(self) -> Any:
        for p in self.leaves:
            p.grad = None
        if self.model.value_and_grad is None:
            loss = self.model.fn("loss")(self.p, self.data)
            self._backward(loss)
            return loss.detach()
        loss, g = self.model.value_and_grad(tree_map(torch.Tensor.detach, self.p), self.data)
        for p, grad in zip(self.leaves, leaves(g), strict=True):
            p.grad = grad
        return loss.detach()

    def _backward(self, loss: Any) -> None:
        loss.backward()

    def _update(self) -> None:
        self.opt.step()

    def _train_step(self) -> Any:
        loss = self._forward_backward()
        self._update()
        return loss

    def params(self) -> dict[str, Any]:
        return self.model.flat(tree_map(torch.Tensor.detach, self.p))

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        # Eager even for jit: the compiled step's numerics are what the trajectory check
        # compares, and a second torch.compile for this one call would double compile time.
        loss = self._forward_backward()
        return loss, self.model.flat(tree_map(lambda p: p.grad, self.p))

    def step(self) -> Any:
        return self.train_step()

    def state(self) -> dict[str, Any]:
        return optimizer_state(self.opt, self.opt_spec, self.p, self.model.flat)

    def hyperparameters(self) -> dict[str, float]:
        return optimizer_hyperparameters(self.opt, self.opt_spec)


class ScaledTrainer(Trainer):
    """A loss-scaling policy's (amp16) trainer, as torch's users write it: torch.amp.GradScaler
    scales the loss before backward, then steps in opt.step's place (unscaling the gradients,
    skipping a step whose gradients are not all finite) and updates the scale by precision's
    rule (under torch.compile the GradScaler calls break the graph: dynamo runs torch.amp's
    code eagerly, the optimizer's step it calls compiled)."""

    def __init__(self, model: Model, case: Any) -> None:
        self.scaler = torch.amp.GradScaler(
            leaves(case.params)[0].device.type, init_scale=case.policy.loss_scale,
            growth_factor=precision.GROWTH, backoff_factor=precision.BACKOFF,
            growth_interval=precision.GROWTH_INTERVAL)
        super().__init__(model, case)

    def _backward(self, loss: Any) -> None:
        self.scaler.scale(loss).backward()

    def _update(self) -> None:
        self.scaler.step(self.opt)
        self.scaler.update()

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        # the scaled backward's gradients divided by the scale (exact: a power of two), as
        # scaler.unscale_ would, without its record of this step in the scaler's state
        loss = self._forward_backward()
        scale = self.scaler.get_scale()
        return loss, self.model.flat(tree_map(lambda p: p.grad / scale, self.p))

    def loss_scale(self) -> Any:
        return torch.tensor(self.scaler.get_scale())


SLOTS = {"momentum": "momentum_buffer", "m": "exp_avg", "v": "exp_avg_sq"}


def optimizer_state(opt: torch.optim.Optimizer, spec: Any, tree: Any,
                    flat: Callable[[Any], dict[str, Any]] = dict) -> dict[str, Any]:
    """``opt``'s state in the canonical names, for the parameters of ``tree`` (the very
    tensors ``opt`` holds), each slot's tree made the spec's flat dict by ``flat``; a slot
    torch has not made yet (before the first step) reads as zeros."""
    def slot(p: Any, key: str) -> Any:
        found = opt.state.get(p, {}).get(key)
        return torch.zeros_like(p.detach()) if found is None else found

    slots = {name: flat(tree_map(lambda p, key=key: slot(p, key), tree))
             for name, key in SLOTS.items() if name in spec.slots}
    count = None
    if spec.counted:
        count = opt.state.get(leaves(tree)[0], {}).get("step", torch.zeros(()))
    return canonical_state(slots, count)


def optimizer_hyperparameters(opt: torch.optim.Optimizer, spec: Any) -> dict[str, float]:
    group = opt.param_groups[0]
    b1, b2 = group.get("betas", (None, None))
    return hyper({"lr": group["lr"], "momentum": group.get("momentum"), "b1": b1, "b2": b2,
                  "eps": group.get("eps"),
                  "weight_decay": group["weight_decay"] if spec.name == "adamw" else None})


class Jvp(Transform):
    """Outputs' tangent along a parameter tangent: torch.func.jvp (forward mode)."""

    def make(self) -> Any:
        forward = self.model.fn("forward")

        def jvp(p: Any, data: Any, tangent: Any) -> Any:
            return torch.func.jvp(lambda q: forward(q, data), (p,), (tangent,))[1]

        return jvp

    def apply(self, probe: Any) -> Any:
        return self.fn(self.p, self.data, self.model.tree(probe))


class Vjp(Transform):
    """Parameter cotangent of an output cotangent ``u``: torch.func.vjp (reverse mode)."""

    def make(self) -> Any:
        forward = self.model.fn("forward")

        def vjp(p: Any, data: Any, u: Any) -> Any:
            return torch.func.vjp(lambda q: forward(q, data), p)[1](u)[0]

        return vjp

    def apply(self, probe: Any) -> Any:
        return self.model.flat(self.fn(self.p, self.data, probe["u"]))


class Hvp(Transform):
    """Hessian of the loss times a parameter vector: forward over reverse (jvp of grad)."""

    def make(self) -> Any:
        loss = self.model.fn("loss")

        def hvp(p: Any, data: Any, v: Any) -> Any:
            grad = torch.func.grad(lambda q: loss(q, data))
            return torch.func.jvp(grad, (p,), (v,))[1]

        return hvp

    def apply(self, probe: Any) -> Any:
        return self.model.flat(self.fn(self.p, self.data, self.model.tree(probe)))


class Jacobian(Transform):
    """Per-example Jacobian of the outputs w.r.t. the first input: vmap(jacfwd | jacrev)."""

    def make(self) -> Any:
        forward, case = self.model.fn("forward"), self.case
        mode = torch.func.jacfwd if case.task.transform == "jacfwd" else torch.func.jacrev

        def jacobian(p: Any, inputs: Any) -> Any:
            key, x, rest = split_inputs(case, inputs)
            return torch.func.vmap(mode(one_example(forward, p, key)))(x, rest)

        return jacobian

    def apply(self, probe: Any) -> Any:
        return self.fn(self.p, probe)
