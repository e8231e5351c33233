"""Autodiff transforms of the seed MLP: jvp, vjp, Hessian-vector product, per-example Jacobians
(forward and reverse mode), each the framework's own transform of the same model.

What is compared: the seed MLP of suites/mlp (z = tanh(x w1) w2, mean binary cross-entropy on
the logits z; the mlp's data and weights, byte for byte) under
- jvp: the outputs' tangent along a parameter tangent (forward mode: jax.jvp,
  torch.func.jvp, tf.autodiff.ForwardAccumulator, autograd's make_jvp);
- vjp: the parameter cotangent of an output cotangent (jax.vjp, torch.func.vjp, GradientTape
  with output_gradients, autograd's make_vjp);
- hvp: the Hessian of the loss times a parameter vector, forward over reverse (jvp of grad;
  TF's ForwardAccumulator over a GradientTape); autograd has no forward mode through its
  backward pass and uses its own make_hvp, reverse over reverse;
- jacfwd / jacrev: the Jacobian of each example's output with respect to its input, [batch,
  1, 128]: vmap(jacfwd) and vmap(jacrev) in JAX and torch.func, tape.batch_jacobian in TF,
  autograd's jacobian of the batch-summed outputs (reverse mode). TF and Autograd have no
  forward-mode Jacobian, and eager TF no op-by-op forward mode (its ForwardAccumulator traces
  a tf.function per op), so TF's jvp and hvp run compiled only.
Every call takes a fresh probe (a tangent, a cotangent or an input batch, seeded by the call's
index). References: the float64 oracle (JAX x64, cross-checked with torch float64), verified
against finite differences of the NumPy forward below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_mlbench import Shape, load_suite_file, transform

MLP = load_suite_file(Path(__file__).parent.parent / "mlp" / "spec.py")
IN, HIDDEN = MLP.IN, MLP.HIDDEN


def forward(xp: Any, p: Mapping[str, Any], d: Mapping[str, Any]) -> Any:
    """The logits z (batch, 1), in the Python array API."""
    return xp.tanh(d["x"] @ p["w1"]) @ p["w2"]


def objective(xp: Any, z: Any, d: Mapping[str, Any]) -> Any:
    """Mean binary cross-entropy on logits: softplus(z) - y z."""
    return xp.mean(xp.logaddexp(xp.zeros_like(z), z) - d["y"] * z)


# Matmul FLOPs of what each transform must compute (B batch, D = IN, H = HIDDEN, one output);
# what no output depends on (the primal z of a jvp, the gradient inside an hvp) is not counted,
# nor is work a framework can hoist out of the examples (the identity basis through w1).
def jvp_flops(dims: Mapping[str, int]) -> int:
    """x w1; tangents x dw1, dh w2 and h dw2."""
    b = dims["batch"]
    return 4 * b * IN * HIDDEN + 4 * b * HIDDEN


def vjp_flops(dims: Mapping[str, int]) -> int:
    """x w1; h^T u, u w2^T and x^T da."""
    b = dims["batch"]
    return 4 * b * IN * HIDDEN + 4 * b * HIDDEN


def hvp_flops(dims: Mapping[str, int]) -> int:
    """Primal x w1, h w2, dz w2^T; tangents of x w1, h w2, dz w2^T, x^T da, h^T dz."""
    b = dims["batch"]
    return 6 * b * IN * HIDDEN + 16 * b * HIDDEN


def jacfwd_flops(dims: Mapping[str, int]) -> int:
    """x w1; the identity basis through w1 once (D^2 H); the D tangents of each example
    through w2."""
    return 4 * dims["batch"] * IN * HIDDEN + 2 * IN * IN * HIDDEN


def jacrev_flops(dims: Mapping[str, int]) -> int:
    """x w1; each example's one cotangent back through w1."""
    return 4 * dims["batch"] * IN * HIDDEN


SPEC = replace(
    MLP.SPEC,
    name="mlp_ad",
    summary=__doc__.splitlines()[0],
    data_key=MLP.SPEC.name,  # the mlp's data and weights, byte for byte
    implementations_from="mlp",  # its models; the builders run this spec's tasks
    sizes={
        "smoke": (Shape({"batch": 16}),),
        # 10 calls a round of 17 to 26 MFLOP each (the forward-mode Jacobian's identity basis
        # goes through w1 once): ~10 to 40 ms a round
        "default": (Shape({"batch": 256}, steps_per_call=10),),
        "paper": (Shape({"batch": 1024}, "b1024", steps_per_call=10, rounds=5),),
    },
    learning_rate=None,
    # The Hessian-vector product (forward over reverse) is the main job's (-m mlbench_main).
    tasks=(transform("jvp", flops=jvp_flops, main=False),
           transform("vjp", flops=vjp_flops, main=False),
           transform("hvp", flops=hvp_flops),
           transform("jacfwd", flops=jacfwd_flops, main=False),
           transform("jacrev", flops=jacrev_flops, main=False)),
    forward=forward,
    objective=objective,
    flops_per_step=None,
    parallel={},
    unsupported={
        ("tensorflow", "jacfwd"): "TensorFlow has no per-example forward-mode Jacobian "
                                  "(tape.batch_jacobian is reverse mode)",
        ("autograd", "jacfwd"): "Autograd has no forward-mode Jacobian (its jacobian is "
                                "reverse mode)",
        **{("tensorflow", "eager", name): "eager TensorFlow has no op-by-op forward mode: "
                                          "ForwardAccumulator traces a tf.function for each "
                                          "op's JVP" for name in ("jvp", "hvp")},
    },
    implementations={
        "autograd": ("eager",),
        "jax": ("eager", "jit"),
        "torch": ("eager", "jit"),
        "tensorflow": ("eager", "jit", "xla"),
    },
)
