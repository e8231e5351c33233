"""The seed MLP's optimizers: momentum, Adam and AdamW steps, each through the framework's own
optimizer, from the mlp's bytes.

What is compared: one optimizer step of the seed MLP (suites/mlp: 128 -> tanh(128) -> 1, mean
binary cross-entropy on logits) with heavy-ball momentum (torch.optim.SGD(momentum), optax.sgd
(momentum), Keras SGD(momentum)), Adam (torch.optim.Adam, optax.adam, Keras Adam) and AdamW
with decoupled weight decay (torch.optim.AdamW, optax.adamw, Keras AdamW), same hyper-parameters
everywhere and read back from each optimizer. Autograd and NumPy have no optimizer: they apply
the spec's update (pytest_mlbench.workloads.optim) at the policy dtype, NumPy with the mlp's hand-written
gradient. The reference is the mlp's hand-derived gradient and the float64 update of
workloads/optim.py; the optimizer state (momentum buffer, both Adam moments, the step count) is checked
after the first step, after the checked steps and in every audited round.

One algorithm per task in every framework: the builders give Keras's Adam and AdamW the
spec's step (Keras adds epsilon to sqrt(v_t) before the bias correction, an "epsilon hat" of
eps sqrt(1 - b2^t) in the spec's form; torch and optax add it to sqrt(v_hat_t)), make every
Keras constant at the parameters' dtype, and count torch's Adam steps in float64 (under
torch.compile a float32 count rounds the bias corrections); tests/unit/builders/test_optimizer_algorithms.py
holds each framework's optimizer to workloads/optim.py's float64 update to 1e-12. Adam's epsilon is
1e-12, not the usual 1e-8: chosen when the Keras form was compared as it ships (at 1e-8 the
two forms move the seed MLP's first step apart by 3% of its norm, its gradients reaching down
to 1e-8), and kept so that the task's records and tolerances stay those of one task.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_mlbench import adam, adamw, load_suite_file, momentum, train

EPS = 1e-12  # see above
MLP = load_suite_file(Path(__file__).parent.parent / "mlp" / "spec.py")

SPEC = replace(
    MLP.SPEC,
    name="mlp_optim",
    summary=__doc__.splitlines()[0],
    data_key=MLP.SPEC.name,  # the mlp's data and weights, byte for byte
    implementations_from="mlp",  # its models; the builders run this spec's tasks
    learning_rate=None,
    # Adam is the main job's (-m mlbench_main); momentum and AdamW run when asked for.
    tasks=(train(momentum(1e-2, 0.9), main=False), train(adam(1e-3, eps=EPS)),
           train(adamw(1e-3, eps=EPS, weight_decay=1e-2), main=False)),
    # parallel cases (--mlbench-workers above 1) of every optimizer: replicated (dp) and
    # sharded (fsdp: the optimizer's slots sharded with the parameters), the mlp's engines
    parallel={s: {"jax": "jit", "torch": "eager"} for s in ("dp", "fsdp")},
    implementations={
        "numpy": ("eager",),
        "autograd": ("eager",),
        "jax": ("eager", "jit"),
        "torch": ("eager", "jit"),
        "tensorflow": ("eager", "jit", "xla"),
    },
)
