"""Each framework's built optimizer, stepped at float64 on a problem where the algorithm shows,
against workloads/optim.py's float64 update: run as ``python -m tests.optimizer_algorithms FRAMEWORK``
(one framework a process, as workers are), printing one JSON line per variant and optimizer.

The problem: ``loss = sum(a p^2 / 2 + c p)`` on one parameter vector whose gradients
``a p + c`` are of order 1e-8, about Adam's epsilon, so where epsilon sits in the update moves
each step by tens of percent; a float32 bias correction or learning rate shows at 1e-8 and
the float64 rounding of one honest step at 1e-16. The reference steps with its own float64
gradient along its own trajectory. Then, where the optimizers the frameworks ship differ
(Keras's Adam and AdamW, torch's float32 step count under torch.compile), the same runs with
those, marked ``"stock": true``: a test shows they are caught.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from types import SimpleNamespace
from typing import Any

import numpy as np

from pytest_mlbench import adam, adamw, frameworks, momentum, sgd, train
from pytest_mlbench.builders import functional
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.workloads.case import Case

STEPS = 6
SIZE = 64
OPTIMIZERS = {"sgd": sgd(1e-3), "momentum": momentum(1e-3, 0.9),
              "adam": adam(1e-3, eps=1e-8), "adamw": adamw(1e-3, eps=1e-8, weight_decay=1e-2)}
VARIANTS = {"numpy": ("eager",), "autograd": ("eager",), "jax": ("eager", "jit"),
            "torch": ("eager", "jit"), "tensorflow": ("eager", "jit", "xla")}
# where the optimizers the frameworks ship are not the spec's algorithm, and in which variant
STOCK = {"tensorflow": ("eager",), "torch": ("jit",)}


def problem() -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Seeded (params, data): p of order 1e-2, a and c such that a p + c is of order 1e-8."""
    rng = np.random.default_rng(32)
    params = {"w": 1e-2 * rng.standard_normal(SIZE)}
    data = {"a": 1e-6 * rng.uniform(0.5, 1.5, SIZE), "c": 1e-8 * rng.standard_normal(SIZE)}
    return params, data


def loss_and_grad(p: dict[str, np.ndarray], d: dict[str, np.ndarray]) -> Any:
    w = p["w"]
    return (d["a"] * w * w / 2 + d["c"] * w).sum(), {"w": d["a"] * w + d["c"]}


def reference(opt: Any) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """workloads/optim.py's float64 steps: (params, state) after STEPS steps."""
    params, data = problem()
    state = opt.init_state(params)
    for _ in range(STEPS):
        params, state = opt.update(params, loss_and_grad(params, data)[1], state)
    return params, state


def model(framework: str) -> Any:
    """The loss in the framework's own ops: its autodiff gives the gradient."""
    if framework == "numpy":
        return functional.numpy(value_and_grad=loss_and_grad)
    if framework == "autograd":
        return functional.autograd(loss=lambda p, d: (d["a"] * p["w"] ** 2 / 2
                                                      + d["c"] * p["w"]).sum())
    ops = {"jax": "jax.numpy", "torch": "torch", "tensorflow": "tensorflow"}[framework]
    sum_ = {"jax": "sum", "torch": "sum", "tensorflow": "reduce_sum"}[framework]
    module = __import__(ops, fromlist=["_"])

    def loss(p: Any, d: Any) -> Any:
        return getattr(module, sum_)(d["a"] * p["w"] * p["w"] / 2 + d["c"] * p["w"])

    return getattr(functional, framework)(loss=loss)


def case(framework: str, variant: str, opt: Any, adapter: Any) -> Case:
    params, data = problem()
    cid = SimpleNamespace(task=train(opt), variant=variant,
                          name=f"algorithm-{opt.name}-{framework}-{variant}-cpu-fp64")
    convert = adapter.asarray
    return Case(cid, adapter, POLICIES["fp64"],  # type: ignore[arg-type]
                {k: convert(v) for k, v in data.items()},
                {k: convert(v) for k, v in params.items()}, seed=0)


def relative(found: Any, expected: np.ndarray, start: np.ndarray | None = None) -> float:
    """||found - expected|| / ||expected - start||: the error against what moved."""
    found = np.asarray(found, dtype=np.float64)
    scale = expected if start is None else expected - start
    return float(np.linalg.norm(found - expected) / max(np.linalg.norm(scale), 1e-300))


def errors(trainer: Any, opt: Any, adapter: Any) -> dict[str, float]:
    """The built optimizer's params and state after STEPS steps against the reference's."""
    for _ in range(STEPS):
        adapter.sync(trainer.step())
    expected_p, expected_state = reference(opt)
    start = problem()[0]["w"]
    out = {"w": relative(adapter.to_numpy(trainer.params()["w"]), expected_p["w"], start)}
    found = trainer.state() if hasattr(trainer, "state") else {}
    for key, value in expected_state.items():
        out[key] = relative(adapter.to_numpy(found[key]), value) if key in found else np.inf
    return out


def keras_bfloat16(opt: Any) -> dict[str, Any]:
    """The Keras builder's optimizer on a bfloat16 variable against the float64 steps: the
    displacement's error (about 2% for Adam: bfloat16 keeps 8 bits) and the dtype of every
    slot it keeps. Adam's coefficients rounded carelessly (1 - bfloat16(0.999) is 0) leave
    v at zero and step lr m / eps."""
    import tensorflow as tf

    from pytest_mlbench.builders import tensorflow_

    start, data = problem()
    var = tf.Variable(tf.cast(start["w"], tf.bfloat16))
    built = tensorflow_.optimizer(opt, "bfloat16")
    built.build([var])
    for _ in range(STEPS):
        grad = loss_and_grad({"w": tf.cast(var, tf.float64).numpy()}, data)[1]["w"]
        built.apply([tf.cast(grad, tf.bfloat16)], [var])
    expected = reference(opt)[0]["w"]
    slots = {v.path: v.dtype for v in built.variables if v.shape == var.shape}
    return {"errors": {"w": relative(tf.cast(var, tf.float64).numpy(), expected, start["w"])},
            "slots": {k: str(getattr(d, "name", d)) for k, d in slots.items()}}


def optax_bfloat16(opt: Any) -> dict[str, Any]:
    """The JAX builder's optax transformation on a bfloat16 parameter, as keras_bfloat16: its
    float32 hyper-parameters must not carry the slots they scale to float32."""
    import jax
    import jax.numpy as jnp
    import optax

    from pytest_mlbench.builders import jax_

    start, data = problem()
    w = jnp.asarray(start["w"], jnp.bfloat16)
    tx = jax_.transformation(opt, "bfloat16")
    state = tx.init(w)
    for _ in range(STEPS):
        grad = loss_and_grad({"w": np.asarray(w, np.float64)}, data)[1]["w"]
        updates, state = tx.update(jnp.asarray(grad, jnp.bfloat16), state, w)
        w = optax.apply_updates(w, updates)
    expected = reference(opt)[0]["w"]
    slots = {jax.tree_util.keystr(path): str(leaf.dtype)
             for path, leaf in jax.tree_util.tree_leaves_with_path(state.inner_state)
             if getattr(leaf, "shape", None) == w.shape}
    return {"errors": {"w": relative(np.asarray(w, np.float64), expected, start["w"])},
            "slots": slots}


BFLOAT16 = {"tensorflow": (keras_bfloat16, ("adam", "adamw")),
            "jax": (optax_bfloat16, ("momentum", "adam", "adamw"))}


def stock(framework: str) -> None:
    """The frameworks' optimizers as shipped: Keras's Adam and AdamW, torch's float32 count."""
    if framework == "tensorflow":
        import keras

        from pytest_mlbench.builders import tensorflow_

        def shipped(opt: Any, dtype: str) -> Any:
            if opt.counted:
                kind = keras.optimizers.Adam if opt.name == "adam" else keras.optimizers.AdamW
                extra = {"weight_decay": opt.weight_decay} if opt.name == "adamw" else {}
                return kind(learning_rate=opt.lr, beta_1=opt.b1, beta_2=opt.b2,
                            epsilon=opt.eps, **extra)
            return keras.optimizers.SGD(learning_rate=opt.lr, momentum=opt.momentum)

        tensorflow_.optimizer = shipped  # type: ignore[assignment]
    elif framework == "torch":
        from pytest_mlbench.builders import torch_

        torch_.count_in_float64 = lambda opt: None  # type: ignore[assignment]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("framework", choices=sorted(VARIANTS))
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    adapter = frameworks.load(args.framework, frameworks.BUILTIN)
    adapter.setup("cpu", POLICIES["fp64"], 0)
    build = model(args.framework)
    runs = [(False, variant, name) for variant in VARIANTS[args.framework]
            for name in OPTIMIZERS]
    runs += [(True, variant, name) for variant in STOCK.get(args.framework, ())
             for name in ("adam", "adamw")]
    if args.framework in BFLOAT16:
        run_bfloat16, names = BFLOAT16[args.framework]
        for name in names:
            print(json.dumps({"stock": False, "variant": "bfloat16", "optimizer": name,
                              **run_bfloat16(OPTIMIZERS[name])}), flush=True)
    for shipped, variant, name in runs:
        if shipped:
            stock(args.framework)  # after the builders' own runs: it replaces their parts
        opt = OPTIMIZERS[name]
        trainer = build(case(args.framework, variant, opt, adapter))
        print(json.dumps({"stock": shipped, "variant": variant, "optimizer": name,
                          "errors": errors(trainer, opt, adapter)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
