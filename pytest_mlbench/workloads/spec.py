"""Workloads as data: a frozen spec declares shapes, tasks (what one timed step is), seeded
data and weights, the float64 reference and which frameworks implement it. No harness code
per workload; ADDING_WORKLOADS.md is the guide.

A task is one of three kinds:

- ``train(optimizer)``: one optimizer step on the loss (``optim.sgd``, ``momentum``, ``adam``,
  ``adamw``, each through the framework's own optimizer);
- ``infer()``: the forward pass, outputs checked element for element;
- ``transform(name)``: an autodiff transform of the model: ``jvp`` (outputs along a parameter
  tangent), ``vjp`` (parameter cotangent of an output cotangent), ``hvp`` (Hessian of the loss
  times a parameter vector, a second-order case), ``jacfwd`` / ``jacrev`` (per-example Jacobian
  of the outputs with respect to the inputs, forward or reverse mode).

The reference is either hand-derived (``loss`` and ``grad`` in NumPy float64) or only a
forward function written against the Python array API (``forward(xp, params, data)`` and
``objective(xp, outputs, data)``), from which gradients, updates, transforms and Jacobians come
from a float64 autodiff oracle (JAX with x64, else torch float64), verified by finite
differences and cross-checked when both are installed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_mlbench import variants
from pytest_mlbench.parallel import DECLARED, STRATEGIES
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.workloads.optim import Optimizer

Arrays = dict[str, np.ndarray]
Dims = Mapping[str, int]
# (what is checked, a loss of the params, its gradient at the check's point or None)
ReferenceCheck = tuple[str, Callable[[Arrays], float], Arrays | None]
KINDS = ("train", "infer", "transform")
TRANSFORMS = ("jvp", "vjp", "hvp", "jacfwd", "jacrev")
SIZE_NAMES = ("smoke", "default", "paper")  # every workload has these
# sizes a workload may add: ``gpu``, a model the size users train on one GPU (suites/gpt's
# GPT-2 124M, suites/vit's ViT-B/16); a workload without it has no case at that size
OPTIONAL_SIZES = ("gpu",)
DEVICES = ("cpu", "gpu", "tpu")
# a shape's reference (Shape.reference): the float64 one (hand-derived, or the autodiff oracle
# on the CPU), or, where a CPU cannot afford that (GPT-2 124M: minutes a gradient, and its
# finite differences more), the autodiff oracles at float32 on the case's own device, JAX's
# and torch's each checking the other (checking/reference.py)
REFERENCES = ("float64", "float32")
# what a float32 reference can judge: arithmetic rounded far coarser than its own (bfloat16,
# float16, TF32's 10 bits), not float32's or float64's
FLOAT32_REFERENCE_REFUSES = ("fp64", "fp32")


@dataclass(frozen=True)
class Shape:
    """One problem size. ``label`` joins the test id when set (``d10``, ``b4096``)."""

    dims: Mapping[str, int]
    label: str = ""
    steps_per_call: int = 1  # steps (or calls) inside one timed round, one sync at its end
    rounds: int | None = None  # fixed timed rounds in all instead of a time budget
    main: bool = True  # in the main job (``-m mlbench_main``); a sweep keeps its headline point
    # the devices the shape is sized for (() every one): elsewhere its cases skip, saying so,
    # unless --mlbench-force-size (the gpu size on a CPU: minutes a step)
    devices: tuple[str, ...] = ()
    reference: str = "float64"  # or "float32": see REFERENCES

    def unfit(self, workload: str, size: str, device: str, precision: str | None = None,
              forced: bool = False) -> str | None:
        """Why a case of this shape does not run on ``device`` at ``precision`` (None: it
        does; no precision: the device alone); one line naming what to do instead."""
        if self.devices and device not in self.devices and not forced:
            where = " or ".join(self.devices)
            return (f"{workload}'s {size} size is made for a {where}, not this case's {device} "
                    f"(a step takes minutes there); run it with --mlbench-device="
                    f"{self.devices[0]}, or here anyway with --mlbench-force-size")
        if self.reference == "float32" and precision in FLOAT32_REFERENCE_REFUSES:
            return (f"{workload}'s {size} size is checked against a float32 reference (a "
                    f"float64 one does not fit its size), which judges bfloat16, float16 and "
                    f"TF32 arithmetic, not {precision}'s; run it with --mlbench-precision=amp "
                    "(or bf16, amp16, tf32)")
        return None


@dataclass(frozen=True)
class Task:
    """What one timed step is. Build with ``train``, ``infer`` or ``transform``."""

    kind: str
    label: str
    optimizer: Optimizer | None = None
    transform: str | None = None
    flops: Callable[[Dims], int] | None = None  # per step; None: the workload's flops_per_step
    main: bool = True  # in the main job (``-m mlbench_main``) when its shape is too

    def describe(self) -> str:
        if self.kind == "train":
            assert self.optimizer is not None
            return f"{self.optimizer.name} step ({self.optimizer.describe()})"
        if self.kind == "infer":
            return "forward pass"
        return {"jvp": "jacobian-vector product", "vjp": "vector-jacobian product",
                "hvp": "Hessian-vector product", "jacfwd": "Jacobian (forward mode)",
                "jacrev": "Jacobian (reverse mode)"}[str(self.transform)]


def train(optimizer: Optimizer, label: str | None = None,
          flops: Callable[[Dims], int] | None = None, main: bool = True) -> Task:
    return Task("train", label or optimizer.name, optimizer=optimizer, flops=flops, main=main)


def infer(label: str = "infer", flops: Callable[[Dims], int] | None = None,
          main: bool = True) -> Task:
    return Task("infer", label, flops=flops, main=main)


def transform(name: str, label: str | None = None,
              flops: Callable[[Dims], int] | None = None, main: bool = True) -> Task:
    if name not in TRANSFORMS:
        raise ValueError(f"transform {name!r}: choose from {', '.join(TRANSFORMS)}")
    return Task("transform", label or name, transform=name, flops=flops, main=main)


@dataclass(frozen=True)
class Tolerance:
    """Norm-wise: ``||actual - expected|| <= atol * scale + rtol * ||expected||`` per tensor,
    ``scale`` being what the check says (the tensor's own norm, or the start gradient's)."""

    rtol: float
    atol: float


@dataclass(frozen=True)
class Tolerances:
    grad: Tolerance  # loss, gradient, outputs, transforms: one evaluation against float64
    trajectory: Tolerance  # parameters and losses after a few steps


def variants_of(declared: Any) -> tuple[str, ...]:
    """A ``parallel`` entry's variants: one name, or a tuple of them (() for anything else)."""
    if isinstance(declared, str):
        return (declared,)
    if isinstance(declared, tuple | list) and declared and all(
            isinstance(v, str) for v in declared):
        return tuple(declared)
    return ()


@dataclass(frozen=True)
class Workload:
    """One workload folder's SPEC. See ADDING_WORKLOADS.md for every field."""

    name: str
    summary: str
    sizes: Mapping[str, tuple[Shape, ...]]
    make_data: Callable[[np.random.Generator, Dims], Arrays]
    make_params: Callable[[np.random.Generator, Dims], Arrays]
    implementations: Mapping[str, tuple[str, ...]]
    learning_rate: float | None = None  # shorthand for tasks=(train(sgd(learning_rate)),)
    tasks: tuple[Task, ...] = ()
    # the reference: hand-derived NumPy float64 ...
    loss: Callable[[Arrays, Arrays], float] | None = None
    grad: Callable[[Arrays, Arrays], Arrays] | None = None
    # ... and/or the model in the array API (xp is numpy, jax.numpy or torch)
    forward: Callable[[Any, Arrays, Arrays], Any] | None = None
    objective: Callable[[Any, Any, Arrays], Any] | None = None
    input_keys: tuple[str, ...] = ("x",)  # data keys the model reads; the rest are targets
    # how a timed step's fresh batch is drawn (data.batch_rows): every array's rows along its
    # first axis, the same rows of all; here an array may name another group of rows, drawn
    # apart ({"edges": "edges"}: a graph's edge list, its own rows), or None for an array
    # every step reads as seeded (a fixed graph)
    batch_rows: Mapping[str, str | None] = field(default_factory=dict)
    flops_per_step: Callable[[Dims], int] | None = None
    # (framework | variant | precision | device | task, ...) -> reason; matching cases skip
    unsupported: Mapping[tuple[str, ...], str] = field(default_factory=dict)
    check_steps: int = 3  # steps of the trajectory check before timing
    reference_checks: Callable[[Arrays, Arrays], Sequence[ReferenceCheck]] | None = None
    default_precisions: tuple[str, ...] | None = None
    data_key: str | None = None  # seed the data from another workload's name: same bytes
    tolerances: Mapping[str, Tolerances] = field(default_factory=dict)  # per precision
    # the layers of rounded arithmetic from the inputs to the loss (matmuls, convolutions,
    # recurrent steps, one after another), a number or a function of the shape's dims: a
    # mixed-precision case's tolerance grows with its square root (checking/asserts.py)
    depth: int | Callable[[Dims], int] = 1
    # parallel strategies (pytest_mlbench/parallel.py) at more than one worker: strategy
    # ("dp", "fsdp", "tp") -> {framework: the variant that runs it, or a tuple of them};
    # "dpxtp" (a 2-D mesh) is there where both dp and tp are
    parallel: Mapping[str, Mapping[str, str | tuple[str, ...]]] = field(default_factory=dict)
    # the tensor-parallel plan: a parameter-name pattern (fnmatch) -> the axis its tensor is
    # split along over the model axis (Megatron: 1 for a column-parallel weight (in, out) and
    # its bias 0, 0 for the row-parallel weight after it); unnamed parameters are replicated
    tensor_parallel: Mapping[str, int] = field(default_factory=dict)
    # the strategies whose cases (at the headline shape and task) join the scaling job
    # (-m mlbench_scale, tox -e bench-scale; jobs.py), beside the one-worker cases
    main_strategies: tuple[str, ...] = ("dp",)
    # another workload folder (beside this one) whose impl_<framework>.py serve every
    # framework this folder has no file for: one model, other tasks or data
    implementations_from: str | None = None

    # -- derived ----------------------------------------------------------------------------

    @property
    def all_tasks(self) -> tuple[Task, ...]:
        if self.tasks:
            return self.tasks
        if self.learning_rate is None:
            return ()
        from pytest_mlbench.workloads.optim import sgd

        return (train(sgd(self.learning_rate)),)

    def task(self, label: str) -> Task:
        for t in self.all_tasks:
            if t.label == label:
                return t
        raise KeyError(f"workload {self.name!r} has no task {label!r}")

    @property
    def tasks_in_ids(self) -> bool:
        return len(self.all_tasks) > 1

    def shape(self, size: str, label: str) -> Shape:
        for s in self.sizes[size]:
            if s.label == label:
                return s
        raise KeyError(f"workload {self.name!r} has no {size} shape {label!r}")

    def depth_at(self, dims: Dims) -> int:
        """``depth`` at a shape (problems() has checked it is a positive integer)."""
        return int(self.depth(dims) if callable(self.depth) else self.depth)

    def flops(self, task: Task, dims: Dims) -> int | None:
        """FLOPs per step (problems() has checked the function returns an integer)."""
        fn = task.flops or (self.flops_per_step if task.kind == "train" else None)
        return int(fn(dims)) if fn else None

    @property
    def hand_gradient(self) -> bool:
        return self.grad is not None

    def reference_loss(self, params: Arrays, data: Arrays) -> float:
        """The float64 loss: the hand-written one, or objective(forward) in NumPy."""
        if self.loss is not None:
            return float(self.loss(params, data))
        assert self.forward is not None and self.objective is not None
        return float(self.objective(np, self.forward(np, params, data), data))

    def inputs(self, data: Mapping[str, Any]) -> dict[str, Any]:
        return {k: data[k] for k in self.input_keys if k in data}

    def strategies(self, framework: str, variant: str) -> tuple[str, ...]:
        """The parallel strategies this implementation runs (parallel.STRATEGIES order)."""
        found = [s for s in DECLARED
                 if variant in variants_of(self.parallel.get(s, {}).get(framework))]
        if "dp" in found and "tp" in found:
            found.append("dpxtp")
        return tuple(found)

    def split_axis(self, name: str) -> int | None:
        """The axis the tensor-parallel plan splits parameter ``name`` along (None: kept
        whole on every worker of the model axis)."""
        return next((axis for pattern, axis in self.tensor_parallel.items()
                     if fnmatch.fnmatchcase(name, pattern)), None)

    def unsupported_reason(self, *parts: str) -> str | None:
        for key, reason in self.unsupported.items():
            if set(key) <= set(parts):
                return reason
        return None

    def problems(self) -> list[str]:
        """Every rule of ADDING_WORKLOADS.md this spec breaks, one line each (empty: fine).
        Fields of the wrong type are reported first, alone: the later rules read them."""
        typed = self._type_problems()
        if typed:
            return typed
        out = self._flops_problems() + self._depth_problems()
        missing = [s for s in SIZE_NAMES if s not in self.sizes]
        if missing:
            out.append(f"sizes lacks {', '.join(missing)}: every size profile "
                       f"({', '.join(SIZE_NAMES)}) needs a tuple of Shape")
        for size, shapes in self.sizes.items():
            if not shapes or not all(isinstance(s, Shape) for s in shapes):
                out.append(f"sizes[{size!r}] must be a non-empty tuple of Shape")
            elif len({s.label for s in shapes}) != len(shapes):
                out.append(f"sizes[{size!r}] has shapes with the same label")
        out += self._size_problems()
        out += self._task_problems()
        out += self._reference_problems()
        out += self._declaration_problems()
        wanted = self.default_precisions
        if wanted is not None and (not wanted or not set(wanted) <= set(POLICIES)):
            out.append(f"default_precisions={wanted!r} must be a non-empty tuple of policy "
                       f"names ({', '.join(POLICIES)})")
        return out

    def _type_problems(self) -> list[str]:
        """Each field of the type ADDING_WORKLOADS.md gives it, or one line saying which
        (``sizes="smoke"``, a learning rate in quotes, a task that is not a Task)."""
        out = []
        if not isinstance(self.name, str) or not self.name:
            out.append(f"name={self.name!r} must be a non-empty string")
        if not isinstance(self.sizes, Mapping) or not all(
                isinstance(k, str) and isinstance(v, tuple | list) for k, v in self.sizes.items()):
            out.append(f"sizes={_short(self.sizes)} must map each size profile "
                       f"({', '.join(SIZE_NAMES)}) to a tuple of Shape")
        else:
            out += _shape_problems(self.sizes)
        if not isinstance(self.implementations, Mapping) or not all(
                isinstance(k, str) and isinstance(v, tuple | list)
                and all(isinstance(x, str) for x in v) for k, v in self.implementations.items()):
            out.append(f"implementations={_short(self.implementations)} must map a framework "
                       "name to a tuple of variant names, e.g. {'jax': ('eager', 'jit')}")
        else:
            out += [f"implementations[{fw!r}]: {why}" for fw, names in
                    self.implementations.items() for v in names
                    if (why := variants.problem(v)) is not None]
        lr = self.learning_rate
        if lr is not None and not (_real(lr) and lr > 0):
            out.append(f"learning_rate={lr!r} must be a positive number (not a string)")
        if not isinstance(self.tasks, tuple | list) or not all(
                isinstance(t, Task) for t in self.tasks):
            out.append(f"tasks={_short(self.tasks)} must be a tuple of train(...), infer() or "
                       "transform(...)")
        for field_name in ("make_data", "make_params", "loss", "grad", "forward", "objective",
                           "flops_per_step", "reference_checks"):
            value = getattr(self, field_name)
            if value is not None and not callable(value):
                out.append(f"{field_name}={_short(value)} must be a function")
        source = self.implementations_from
        if source is not None and not (isinstance(source, str) and source
                                       and "/" not in source and "\\" not in source):
            out.append(f"implementations_from={_short(source)} must be the name of another "
                       "workload folder beside this one, e.g. 'mlp'")
        out += self._parallel_type_problems()
        if not (isinstance(self.check_steps, int) and self.check_steps >= 1):
            out.append(f"check_steps={self.check_steps!r} must be a positive integer")
        return out

    def _parallel_type_problems(self) -> list[str]:
        out = []
        declared = self.parallel
        if not isinstance(declared, Mapping) or not all(
                k in DECLARED and isinstance(v, Mapping)
                and all(isinstance(f, str) and variants_of(x) for f, x in v.items())
                for k, v in declared.items()):
            out.append(f"parallel={_short(declared)} must map a strategy ({', '.join(DECLARED)}) "
                       "to {framework: variant or tuple of variants}, e.g. {'dp': {'jax': 'jit', "
                       "'torch': ('eager', 'jit')}}")
        elif "tp" in declared and not self.tensor_parallel:
            out.append("parallel declares 'tp' but tensor_parallel names no parameter to split: "
                       "give {parameter-name pattern: axis}, e.g. {'w1': 1, 'w2': 0}")
        main = self.main_strategies
        if not isinstance(main, tuple | list) or not set(main) <= set(STRATEGIES):
            out.append(f"main_strategies={_short(main)} must be a tuple of strategies "
                       f"({', '.join(STRATEGIES)})")
        plan = self.tensor_parallel
        if not isinstance(plan, Mapping) or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
                for k, v in plan.items()):
            out.append(f"tensor_parallel={_short(plan)} must map a parameter-name pattern to the "
                       "axis it is split along, e.g. {'*fc_w': 1, '*fc2_w': 0}")
        return out

    def _flops_problems(self) -> list[str]:
        """Each task's FLOPs function, called on every shape, gives a non-negative integer
        (called here, once, so a wrong one is this folder's failure, not the session's)."""
        out = []
        shapes = [s for shapes in self.sizes.values() for s in shapes if isinstance(s, Shape)]
        for task in self.all_tasks:
            fn = task.flops or (self.flops_per_step if task.kind == "train" else None)
            if fn is None:
                continue
            if not callable(fn):
                out.append(f"task {task.label!r}: flops={_short(fn)} must be a function")
                continue
            for shape in shapes:
                try:
                    value = fn(shape.dims)
                except Exception as exc:  # noqa: BLE001 - reported as this folder's problem
                    out.append(f"task {task.label!r}: its FLOPs function raised "
                               f"{type(exc).__name__}: {exc} for dims {dict(shape.dims)}")
                    break
                if not (isinstance(value, int | np.integer) and not isinstance(value, bool)
                        and value >= 0):
                    out.append(f"task {task.label!r}: its FLOPs function returned "
                               f"{_short(value)} for dims {dict(shape.dims)}; it must return "
                               "a non-negative integer (FLOPs per step)")
                    break
        return out

    def _depth_problems(self) -> list[str]:
        """``depth``, at every shape, is a positive integer."""
        shapes = [s for shapes in self.sizes.values() for s in shapes if isinstance(s, Shape)]
        for shape in shapes:
            try:
                value = self.depth(shape.dims) if callable(self.depth) else self.depth
            except Exception as exc:  # noqa: BLE001 - reported as this folder's problem
                return [f"depth raised {type(exc).__name__}: {exc} for dims {dict(shape.dims)}"]
            if not (isinstance(value, int | np.integer) and not isinstance(value, bool)
                    and value >= 1):
                return [f"depth={_short(value)} at dims {dict(shape.dims)}; it must be a "
                        "positive integer (layers of rounded arithmetic from inputs to loss) "
                        "or a function of the dims giving one"]
        return []

    def _size_problems(self) -> list[str]:
        """Size names --mlbench-size can pick, and each shape's devices and reference."""
        known = SIZE_NAMES + OPTIONAL_SIZES
        out = [f"sizes[{size!r}] is no size profile ({', '.join(known)}): "
               "--mlbench-size could never pick it" for size in self.sizes if size not in known]
        for size, shapes in self.sizes.items():
            for shape in (s for s in shapes if isinstance(s, Shape)):
                where = f"sizes[{size!r}] shape {shape.label or '(unlabelled)'}"
                if not (isinstance(shape.devices, tuple)
                        and set(shape.devices) <= set(DEVICES)):
                    out.append(f"{where}: devices={_short(shape.devices)} must be a tuple of "
                               f"{', '.join(DEVICES)} (empty: every device)")
                if shape.reference not in REFERENCES:
                    out.append(f"{where}: reference={shape.reference!r} must be one of "
                               f"{', '.join(REFERENCES)}")
                elif shape.reference == "float32" and (self.forward is None
                                                       or self.objective is None):
                    out.append(f"{where}: a float32 reference is the autodiff oracles' "
                               "gradient of forward(xp, params, data) and objective(xp, "
                               "outputs, data): give both")
        return out

    def _task_problems(self) -> list[str]:
        if not self.all_tasks:
            return ["no task: give learning_rate (plain SGD) or tasks=(train(...), ...)"]
        labels = [t.label for t in self.all_tasks]
        out = [f"task labels repeat: {labels}"] if len(set(labels)) != len(labels) else []
        if any(t.kind == "train" for t in self.all_tasks) and self.flops_per_step is None \
                and any(t.flops is None for t in self.all_tasks if t.kind == "train"):
            out.append("training tasks need flops_per_step (or a flops= on the task)")
        return out

    def _reference_problems(self) -> list[str]:
        needs_forward = [t.label for t in self.all_tasks if t.kind != "train"]
        out = []
        if needs_forward and self.forward is None:
            out.append(f"tasks {needs_forward} need forward(xp, params, data): the outputs "
                       "they are checked against")
        if self.loss is None and (self.forward is None or self.objective is None):
            out.append("no reference: give loss and grad (hand-derived NumPy) or forward and "
                       "objective (array API; gradients then come from an autodiff oracle)")
        if self.grad is not None and self.loss is None:
            out.append("grad without loss: the hand gradient needs its loss")
        if any(t.transform == "hvp" for t in self.all_tasks) and self.objective is None:
            out.append("an hvp task needs objective(xp, outputs, data): the oracle's Hessian is "
                       "of objective(forward)")
        return out

    def _declaration_problems(self) -> list[str]:
        """Entries that would silently match nothing: an unsupported key naming no framework,
        variant, device, precision or task of this spec; a tolerance for no precision."""
        known = {*self.implementations, *(v for vs in self.implementations.values() for v in vs),
                 *DEVICES, *POLICIES, *(t.label for t in self.all_tasks)}
        out = [f"unsupported key {key!r} names {sorted(set(key) - known)}, which is no framework,"
               " variant, device, precision or task label of this spec"
               for key in self.unsupported if not set(key) <= known]
        for name, tol in self.tolerances.items():
            if name not in POLICIES or not isinstance(tol, Tolerances):
                out.append(f"tolerances[{name!r}] must map a precision ({', '.join(POLICIES)}) "
                           "to Tolerances(grad=Tolerance(...), trajectory=Tolerance(...))")
        return out


def _real(value: Any) -> bool:
    return isinstance(value, int | float | np.floating | np.integer) and not isinstance(
        value, bool) and bool(np.isfinite(value))


def _short(value: Any, width: int = 60) -> str:
    """``repr`` cut to ``width`` characters, naming the type: what a spec gave."""
    text = repr(value)
    text = text if len(text) <= width else text[:width - 3] + "..."
    return f"{text} ({type(value).__name__})"


def _shape_problems(sizes: Mapping[str, Any]) -> list[str]:
    """Each Shape's dims a mapping of names to positive integers."""
    out = []
    for size, shapes in sizes.items():
        for shape in shapes:
            dims = getattr(shape, "dims", None)
            if isinstance(shape, Shape) and not (isinstance(dims, Mapping) and all(
                    isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                    and v > 0 for k, v in dims.items())):
                out.append(f"sizes[{size!r}]: Shape dims={_short(dims)} must map names to "
                           "positive integers, e.g. Shape({'n': 64})")
    return out
