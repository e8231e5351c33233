"""NumPy and Autograd: neither has an optimizer, so a training step applies the spec's own
update (optim.Optimizer.update) to arrays at the policy's dtype, state kept at that dtype.
Autograd differentiates ``loss`` (autograd.value_and_grad) and has its own transforms:
forward-mode make_jvp, make_vjp, make_hvp (reverse over reverse) and jacobian (reverse mode,
of the batch-summed outputs: examples are independent). NumPy takes a hand-written
``value_and_grad`` and runs inference; it has no transforms."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_mlbench.builders.model import Inference, Model, canonical_state, split_inputs, unsupported


def build(model: Model, case: Any) -> Any:
    name = model.need(case)
    if model.framework == "numpy" and name != "infer" and not (
            name == "train" and model.value_and_grad is not None):
        raise unsupported(model, name, "NumPy has no autodiff: it runs inference, and "
                                       "training steps given a hand-written value_and_grad=")
    if name == "jacfwd":
        raise unsupported(model, name, "Autograd has no forward-mode Jacobian")
    kinds = {"train": Trainer, "infer": Inference, "jvp": Jvp, "vjp": Vjp, "hvp": Hvp,
             "jacrev": Jacobian}
    return kinds[name](model, case)


class Trainer:
    def __init__(self, model: Model, case: Any) -> None:
        self.model, self.data, self.opt = model, case.data, case.optimizer
        self.p = model.tree(case.params)
        if model.value_and_grad is not None:
            self.grads = model.value_and_grad
        else:
            import autograd

            self.grads = autograd.value_and_grad(model.fn("loss"))
        flat = model.flat(self.p)
        self.st = {f"{slot}.{k}": np.zeros_like(v) for slot in self.opt.slots
                   for k, v in flat.items()}
        if self.opt.counted:
            self.st["count"] = np.zeros(())
        self.train_step = case.compile(self._train_step)

    def _train_step(self) -> Any:
        loss, g = self.grads(self.p, self.data)
        new, self.st = self.opt.update(self.model.flat(self.p), self.model.flat(g), self.st)
        self.p = self.model.tree(new)
        return loss, g

    def params(self) -> dict[str, Any]:
        return self.model.flat(self.p)

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        loss, g = self.grads(self.p, self.data)
        return loss, self.model.flat(g)

    def step(self) -> Any:
        return self.train_step()[0]

    def state(self) -> dict[str, Any]:
        slots = {s: {k.split(".", 1)[1]: v for k, v in self.st.items() if k.startswith(s + ".")}
                 for s in self.opt.slots}
        return canonical_state(slots, self.st.get("count"))

    def hyperparameters(self) -> dict[str, float]:
        return dict(self.opt.hyperparameters)  # the spec's own: there is no other optimizer


class Transform:
    def __init__(self, model: Model, case: Any) -> None:
        import autograd.differential_operators as ops

        self.ops, self.model, self.case, self.data = ops, model, case, case.data
        self.p = model.tree(case.params)
        self.fn = case.compile(self.apply_to)

    def params(self) -> dict[str, Any]:
        return self.model.flat(self.p)

    def apply(self, probe: Any) -> Any:
        return self.fn(probe)

    def apply_to(self, probe: Any) -> Any:
        raise NotImplementedError


class Jvp(Transform):
    """autograd's forward mode (make_jvp)."""

    def apply_to(self, probe: Any) -> Any:
        forward, data = self.model.fn("forward"), self.data
        return self.ops.make_jvp(lambda q: forward(q, data))(self.p)(self.model.tree(probe))[1]


class Vjp(Transform):
    def apply_to(self, probe: Any) -> Any:
        forward, data = self.model.fn("forward"), self.data
        pullback, _ = self.ops.make_vjp(lambda q: forward(q, data))(self.p)
        return self.model.flat(pullback(probe["u"]))


class Hvp(Transform):
    """make_hvp: the vjp of the gradient (reverse over reverse; the Hessian is symmetric)."""

    def apply_to(self, probe: Any) -> Any:
        loss, data = self.model.fn("loss"), self.data
        hvp, _ = self.ops.make_hvp(lambda q: loss(q, data))(self.p)
        return self.model.flat(hvp(self.model.tree(probe)))


class Jacobian(Transform):
    """jacobian of the batch-summed outputs: [*out, batch, *in], batch moved first."""

    def apply_to(self, probe: Any) -> Any:
        import autograd.numpy as anp

        forward, p = self.model.fn("forward"), self.p
        key, x, rest = split_inputs(self.case, probe)
        jac = self.ops.jacobian(lambda v: anp.sum(forward(p, {**rest, key: v}), axis=0))(x)
        return np.moveaxis(jac, jac.ndim - x.ndim, 0)
