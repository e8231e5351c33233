"""What every framework's builder shares: the model as the suite wrote it, which functions
each kind of task needs, nested trees of arrays, and the canonical optimizer-state names."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

Fn = Callable[..., Any]
NEEDS = {"train": "loss", "infer": "forward", "jvp": "forward", "vjp": "forward",
         "hvp": "loss", "jacfwd": "forward", "jacrev": "forward"}
HYPER_NAMES = ("lr", "momentum", "b1", "b2", "eps", "weight_decay")


@dataclass(frozen=True)
class Model:
    """A model in one framework's ops. ``forward(params, data)`` gives the outputs,
    ``loss(params, data)`` the scalar mean loss; ``params`` is ``to_model(flat)`` (the spec's
    named arrays arranged, or laid out, as the model wants them; ``from_model`` inverts it
    and is applied to parameters, gradients, optimizer slots and parameter-shaped results);
    ``value_and_grad(params, data) -> (loss, grads)`` replaces the framework's autodiff of
    ``loss`` where a training step follows another direction (clipped per-example
    gradients)."""

    framework: str
    forward: Fn | None = None
    loss: Fn | None = None
    to_model: Fn | None = None
    from_model: Fn | None = None
    value_and_grad: Fn | None = None

    def tree(self, flat: Mapping[str, Any]) -> Any:
        return self.to_model(dict(flat)) if self.to_model else dict(flat)

    def flat(self, tree: Any) -> dict[str, Any]:
        return dict(self.from_model(tree)) if self.from_model else dict(tree)

    def fn(self, name: str) -> Fn:
        """``forward`` or ``loss``, which ``need`` has made sure was given."""
        found = getattr(self, name)
        if found is None:
            raise TypeError(f"functional.{self.framework}(...) was given no {name}=")
        return found  # type: ignore[no-any-return]

    def need(self, case: Any) -> str:
        """The task's name (``train``, ``infer``, ``jvp``, ...) after checking that the
        function it needs was given; a one-line TypeError otherwise."""
        task = case.task
        name = task.transform or task.kind
        wanted = NEEDS[name]
        given = self.loss is not None or (name == "train" and self.value_and_grad is not None) \
            if wanted == "loss" else self.forward is not None
        if not given:
            raise TypeError(f"functional.{self.framework}(...) was given no {wanted}=, which "
                            f"a {task.describe()} task needs (case {case.id.name})")
        return name


class Inference:
    """infer: the forward pass compiled once, at the model's params, on each probe's inputs.
    The same for every framework: what differs is in ``forward`` and ``case.compile``."""

    def __init__(self, model: Model, case: Any) -> None:
        self.model, self.p = model, model.tree(case.params)
        self.fn = case.compile(model.fn("forward"))

    def params(self) -> dict[str, Any]:
        return self.model.flat(self.p)

    def forward(self, inputs: Any) -> Any:
        return self.fn(self.p, inputs)


class Transform:
    """transform: one function from ``make()``, compiled once, at the seeded params and data;
    each framework's subclasses make it and apply it to a probe."""

    def __init__(self, model: Model, case: Any) -> None:
        self.model, self.case, self.data = model, case, case.data
        self.p = model.tree(case.params)
        self.fn = case.compile(self.make())

    def make(self) -> Fn:
        raise NotImplementedError

    def params(self) -> dict[str, Any]:
        return self.model.flat(self.p)


def mixed_model(model: Model, case: Any, wrap: Callable[[Fn], Fn]) -> Model:
    """``model`` as a mixed-precision policy runs it: ``forward`` and ``loss`` through
    ``wrap`` (the framework's own way of computing at the policy's compute dtype with float32
    parameters and data: torch.autocast, casts inside the traced or taped function), or
    ``model`` itself for any other policy. Training and inference only: a transform's
    (jvp, hvp, a Jacobian) numerics are what its task checks, at the storage dtype; a
    hand-written ``value_and_grad`` computes its own way."""
    policy = case.policy
    if not policy.mixed:
        return model
    from pytest_mlbench.errors import Unsupported

    task = case.task
    if task.kind not in ("train", "infer"):
        raise Unsupported(f"{policy.name} applies to training and inference, not to a "
                          f"{task.describe()} task")
    if model.value_and_grad is not None:
        raise Unsupported(f"{policy.name} needs the framework's autodiff of loss: this "
                          "implementation brings its own value_and_grad")
    return replace(model, forward=model.forward and wrap(model.forward),
                   loss=model.loss and wrap(model.loss))


def unsupported(model: Model, name: str, why: str, variant: str = "") -> TypeError:
    key = ", ".join(repr(k) for k in (model.framework, variant, name) if k)
    return TypeError(f"functional.{model.framework}: {why}; declare ({key}) in the spec's "
                     "unsupported with that reason")


# -- nested trees of arrays (dicts, lists and tuples), for frameworks without their own ------

def tree_map(fn: Fn, tree: Any, *rest: Any) -> Any:
    if isinstance(tree, Mapping):
        return {k: tree_map(fn, v, *(r[k] for r in rest)) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(tree_map(fn, v, *(r[i] for r in rest)) for i, v in enumerate(tree))
    return fn(tree, *rest)


def leaves(tree: Any) -> list[Any]:
    out: list[Any] = []
    tree_map(out.append, tree)
    return out


# -- inputs, one example at a time (per-example Jacobians) ----------------------------------

def one_example(forward: Fn, params: Any, key: str) -> Fn:
    """``f(x, rest)``: the outputs of one example (no batch axis) from its ``key`` input ``x``
    and its other inputs ``rest``, through the batched ``forward`` on a batch of one."""

    def f(x: Any, rest: Mapping[str, Any]) -> Any:
        batch = {k: v[None] for k, v in rest.items()}
        batch[key] = x[None]
        return forward(params, batch)[0]

    return f


def split_inputs(case: Any, inputs: Mapping[str, Any]) -> tuple[str, Any, dict[str, Any]]:
    """The key the Jacobian is taken with respect to (``input_keys[0]``), its array, and the
    other inputs of the probe."""
    key = case.id.workload.input_keys[0]
    return key, inputs[key], {k: v for k, v in inputs.items() if k != key}


# -- optimizer state and hyper-parameters in canonical names ---------------------------------

def canonical_state(slots: Mapping[str, Mapping[str, Any]], count: Any = None) -> dict[str, Any]:
    """``{"m": {name: array}, ...}`` and a step count as ``{"m.<name>": ..., "count": ...}``."""
    out = {f"{slot}.{name}": value for slot, tree in slots.items() for name, value in tree.items()}
    if count is not None:
        out["count"] = count
    return out


def hyper(found: Mapping[str, Any]) -> dict[str, float]:
    """The canonical hyper-parameters present in ``found`` (None values dropped)."""
    return {k: float(found[k]) for k in HYPER_NAMES if found.get(k) is not None}
