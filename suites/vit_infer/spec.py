"""ViT inference: the forward pass of suites/vit's Vision Transformer, outputs (logits) checked.

What is compared: the logits of a fresh batch of images per call through the ViT of suites/vit
(patch embedding, learned positions, pre-norm blocks of explicit multi-head attention and a
tanh-GELU MLP, mean pooling, linear head), written in each framework's ops (the very forward
functions suites/vit trains) at the vit's seeded weights: jax.numpy under jit or op by op,
torch eager or under torch.compile, TF eager, tf.function or XLA. No autodiff: what differs is
dispatch, fusion and the matmul and softmax kernels.

The reference is the same model written once more, in the Python array API below (evaluated
with NumPy in float64); before any case runs it is checked against suites/vit's own float64
reference (its autograd.numpy forward) through the cross-entropy of its logits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_mlbench import Shape, infer, load_suite_file

VIT = load_suite_file(Path(__file__).parent.parent / "vit" / "spec.py")


def patchify(xp: Any, x: Any, patch: int) -> Any:
    b, s, _, c = x.shape
    g = s // patch
    x = xp.permute_dims(xp.reshape(x, (b, g, patch, g, patch, c)), (0, 1, 3, 2, 4, 5))
    return xp.reshape(x, (b, g * g, patch * patch * c))


def layer_norm(xp: Any, h: Any, g: Any, b: Any) -> Any:
    centred = h - xp.mean(h, axis=-1, keepdims=True)
    var = xp.mean(centred * centred, axis=-1, keepdims=True)
    return centred / xp.sqrt(var + VIT.LN_EPS) * g + b


def softmax(xp: Any, s: Any) -> Any:
    e = xp.exp(s - xp.max(s, axis=-1, keepdims=True))
    return e / xp.sum(e, axis=-1, keepdims=True)


def attention(xp: Any, a: Any, blk: Mapping[str, Any], heads: int) -> Any:
    b, n, d = a.shape
    qkv = xp.reshape(a @ blk["qkv_w"] + blk["qkv_b"], (b, n, 3, heads, d // heads))
    qkv = xp.permute_dims(qkv, (2, 0, 3, 1, 4))  # (3, B, heads, N, d_head)
    q, k, v = qkv[0, ...], qkv[1, ...], qkv[2, ...]
    weights = softmax(xp, q @ xp.matrix_transpose(k) / math.sqrt(d // heads))
    return xp.reshape(xp.permute_dims(weights @ v, (0, 2, 1, 3)), (b, n, d)) @ blk["proj_w"] \
        + blk["proj_b"]


def forward(xp: Any, p: Mapping[str, Any], d: Mapping[str, Any]) -> Any:
    """Logits (B, classes) from the flat params (suites/vit's layout) and NHWC images."""
    tree, x = VIT.to_model(p), d["x"]
    patch, heads = VIT.config(tree["patch_w"].shape, x.shape)
    h = patchify(xp, x, patch) @ tree["patch_w"] + tree["patch_b"] + tree["pos"]
    for blk in tree["blocks"]:
        h = h + attention(xp, layer_norm(xp, h, blk["ln1_g"], blk["ln1_b"]), blk, heads)
        a = layer_norm(xp, h, blk["ln2_g"], blk["ln2_b"]) @ blk["fc1_w"] + blk["fc1_b"]
        gelu = 0.5 * a * (1.0 + xp.tanh(VIT.GELU_C * (a + 0.044715 * a * a * a)))
        h = h + gelu @ blk["fc2_w"] + blk["fc2_b"]
    pooled = xp.mean(layer_norm(xp, h, tree["ln_g"], tree["ln_b"]), axis=1)
    return pooled @ tree["head_w"] + tree["head_b"]


def objective(xp: Any, logits: Any, d: Mapping[str, Any]) -> Any:
    """suites/vit's loss on these logits (mean softmax cross-entropy against one-hot y)."""
    shifted = logits - xp.max(logits, axis=-1, keepdims=True)
    log_probs = shifted - xp.log(xp.sum(xp.exp(shifted), axis=-1, keepdims=True))
    return -xp.mean(xp.sum(d["y"] * log_probs, axis=-1))


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
    forward=forward,
    objective=objective,
    flops_per_step=None,
    parallel={},
)
