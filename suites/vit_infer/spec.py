"""ViT inference: the forward pass of suites/vit's Vision Transformer, outputs (logits) checked.

What is compared: the logits of a fresh batch of images per call through the ViT of suites/vit
(patch embedding, learned positions, pre-norm blocks of explicit multi-head attention and a
tanh-GELU MLP, mean pooling, linear head), written in each framework's ops (the very forward
functions suites/vit trains) at the vit's seeded weights: jax.numpy under jit or op by op,
torch eager or under torch.compile, TF eager, tf.function or XLA. No autodiff: what differs is
dispatch, fusion and the matmul and softmax kernels.

The reference is the same model written once more, in the Python array API (suites/vit's
``api_forward``, evaluated with NumPy in float64); before any case runs it is checked against
suites/vit's own float64 reference (its autograd.numpy forward) through the cross-entropy of
its logits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from pytest_mlbench import Shape, infer, load_suite_file

VIT = load_suite_file(Path(__file__).parent.parent / "vit" / "spec.py")


def flops(dims: Mapping[str, int]) -> int:
    """Matmul FLOPs of the forward pass, with T = B N tokens: the patch embedding 2 T P^2 C D;
    per block qkv 6 T D^2, scores and weights @ V 4 T N D, proj 2 T D^2, MLP 4 T D M; the head
    2 B D K (LayerNorm, softmax and GELU left out)."""
    b, n, d, m = dims["batch"], VIT.num_patches(dims), dims["dim"], dims["mlp"]
    t = b * n
    block = 8 * t * d * d + 4 * t * n * d + 4 * t * d * m
    return 2 * t * dims["patch"] ** 2 * dims["channels"] * d + dims["depth"] * block \
        + 2 * b * d * dims["classes"]


SPEC = replace(
    VIT.SPEC,
    name="vit_infer",
    summary=__doc__.splitlines()[0],
    data_key=VIT.SPEC.name,  # the vit's images and weights, byte for byte
    implementations_from="vit",  # its models; the builders run this spec's tasks
    # the vit's variants but the training step's own idiom (donation: inference has no
    # parameters to donate)
    implementations={framework: tuple(v for v in found if v != "jit+donate")
                     for framework, found in VIT.SPEC.implementations.items()},
    sizes={
        "smoke": VIT.SPEC.sizes["smoke"],
        # CIFAR-sized, as the vit's default: ~0.7 GFLOP a call, 2 calls a round
        "default": (Shape(VIT.size(batch=64, image=32, dim=64, depth=4, mlp=128),
                          steps_per_call=2),),
        # ViT-Tiny width (192, MLP 768, heads of 16) at 12 blocks, a batch of 64
        "paper": (Shape(VIT.size(batch=64, image=32, dim=192, depth=12, mlp=768), "tiny",
                        rounds=10),),
    },
    learning_rate=None,
    tasks=(infer(flops=flops),),
    flops_per_step=None,
    parallel={},
)
