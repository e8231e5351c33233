"""ViT training step, explicit attention (QK^T/sqrt(d), softmax, V; no fused or flash kernels).

A small Vision Transformer: patch embedding, learned positions, pre-norm encoder blocks with
multi-head self-attention and a tanh-GELU MLP, mean pooling, softmax cross-entropy, plain SGD.

Model (the same in every framework, each written as a plain function ``forward(params, x)``):

    patches = patchify(x)                        # (B, H, W, C) -> (B, N, P*P*C)
    h = patches @ patch_w + patch_b + pos        # patch embedding as one matmul, learned positions
    for each block:                              # pre-norm encoder block
        h = h + attention(layer_norm(h, ln1_g, ln1_b))
        h = h + fc2(gelu_tanh(fc1(layer_norm(h, ln2_g, ln2_b))))
    logits = mean_over_tokens(layer_norm(h, ln_g, ln_b)) @ head_w + head_b
    loss = mean over the batch of -sum(y * log_softmax(logits))    # y one-hot

``patchify`` cuts the NHWC image into non-overlapping P x P patches in row-major grid order and
flattens each patch as (row in patch, column in patch, channel). LayerNorm uses the biased
variance and eps = LN_EPS; GELU is the tanh approximation everywhere (jax.nn.gelu(approximate=
True), F.gelu(approximate="tanh"), the formula written out in TensorFlow and the reference).

Sizes give batch B, image side H = W, patch P, channels C, width D, depth, MLP width M, classes
K; N = (H/P)^2 patches, and heads = D / head_dim(D): 16 wide below width 768, 64 from there
(ViT-B's 12 heads of 64).

Parameter layout: one flat dict of named arrays, every matmul weight stored (in, out) so that a
layer is ``x @ w + b``:

    patch_w (P*P*C, D)   patch_b (D,)   pos (N, D)
    block{i}.ln1_g (D,)  block{i}.ln1_b (D,)
    block{i}.qkv_w (D, 3D)  block{i}.qkv_b (3D,)   columns [q | k | v]; inside each D-wide part,
                                                     head h owns columns h*D/heads .. (h+1)*D/heads
    block{i}.proj_w (D, D)  block{i}.proj_b (D,)   rows ordered as the concatenated heads
    block{i}.ln2_g (D,)  block{i}.ln2_b (D,)
    block{i}.fc1_w (D, M)  block{i}.fc1_b (M,)  block{i}.fc2_w (M, D)  block{i}.fc2_b (D,)
    ln_g (D,)  ln_b (D,)  head_w (D, K)  head_b (K,)

``to_model`` maps that flat dict to the nested structure every implementation's forward takes
(the blocks as a list of dicts with the names above, without the ``block{i}.`` prefix);
``from_model`` maps it back, so trainers report params and gradients by the flat names. A
torch.nn.Linear would hold ``w.T``, and nn.MultiheadAttention's in_proj_weight is ``qkv_w.T``.

The float64 reference is the same forward in autograd.numpy, differentiated by autograd (an AD
system distinct from the three under test); test_reference_gradient checks it against central
finite differences. The model is written once more in the Python array API (``api_forward``
and ``api_objective`` below: suites/vit_infer's reference, and the gpu size's, whose float32
reference the autodiff oracles compute from it on the device: checking/reference.py).
Biases, LayerNorm gains and shifts start away from 0 and 1 so that a framework dropping one
of them fails the gradient check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import Arrays, Shape, Tolerance, Tolerances, Workload, digest

try:  # the reference only: collection must not need autograd, an optional extra
    import autograd
    import autograd.numpy as anp
    from autograd.tracer import getval
except ImportError:  # pragma: no cover - the cases then skip, naming the extra
    autograd = None

LN_EPS = 1e-5
HEAD_DIM = 16  # heads = dim / head_dim(dim), so the reference can tell heads from shapes
WIDE, WIDE_HEAD_DIM = 768, 64  # from ViT-B's width up, its heads of 64
GELU_C = math.sqrt(2.0 / math.pi)  # tanh-GELU: 0.5 x (1 + tanh(c (x + 0.044715 x^3)))

GLOBAL_KEYS = ("patch_w", "patch_b", "pos", "ln_g", "ln_b", "head_w", "head_b")
BLOCK_KEYS = ("ln1_g", "ln1_b", "qkv_w", "qkv_b", "proj_w", "proj_b",
              "ln2_g", "ln2_b", "fc1_w", "fc1_b", "fc2_w", "fc2_b")


def head_dim(width: int) -> int:
    """A head's width at model width ``width``: 16 at the CPU sizes, 64 from 768 (ViT-B/16's
    12 heads of 64)."""
    return WIDE_HEAD_DIM if width >= WIDE else HEAD_DIM


# -- the weight mapping ------------------------------------------------------------------------

def block_key(i: int, name: str) -> str:
    return f"block{i}.{name}"


def depth_of(flat: Mapping[str, Any]) -> int:
    depth = 0
    while block_key(depth, "ln1_g") in flat:
        depth += 1
    return depth


def to_model(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The flat, named params (any array type) as the nested tree the forward functions take:
    ``{patch_w, patch_b, pos, ln_g, ln_b, head_w, head_b, blocks: [{ln1_g, ..., fc2_b}, ...]}``.
    No array is copied; a missing or unexpected name raises KeyError."""
    depth = depth_of(flat)
    expected = set(GLOBAL_KEYS) | {block_key(i, k) for i in range(depth) for k in BLOCK_KEYS}
    if set(flat) != expected:
        raise KeyError(f"vit params: missing {sorted(expected - set(flat))}, "
                       f"unexpected {sorted(set(flat) - expected)}")
    tree: dict[str, Any] = {k: flat[k] for k in GLOBAL_KEYS}
    tree["blocks"] = [{k: flat[block_key(i, k)] for k in BLOCK_KEYS} for i in range(depth)]
    return tree


def from_model(tree: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of ``to_model``: nested tree (params or gradients) to flat names."""
    flat = {k: tree[k] for k in GLOBAL_KEYS}
    for i, block in enumerate(tree["blocks"]):
        flat.update({block_key(i, k): block[k] for k in BLOCK_KEYS})
    return flat


# -- seeded start ------------------------------------------------------------------------------

def num_patches(dims: Mapping[str, int]) -> int:
    return (dims["image"] // dims["patch"]) ** 2


def num_heads(dims: Mapping[str, int]) -> int:
    return dims["dim"] // head_dim(dims["dim"])


def make_data(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    b, s, c, k = dims["batch"], dims["image"], dims["channels"], dims["classes"]
    labels = rng.integers(0, k, size=b)
    return {"x": rng.standard_normal((b, s, s, c)), "y": np.eye(k)[labels]}


def make_params(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    """Matmul weights N(0, 1/fan_in); biases and LayerNorm shifts 0.1 N(0, 1); gains
    1 + 0.1 N(0, 1); positions 0.1 N(0, 1)."""
    d, m, k = dims["dim"], dims["mlp"], dims["classes"]
    flat_patch = dims["patch"] ** 2 * dims["channels"]

    def weight(fan_in: int, fan_out: int) -> np.ndarray:
        return rng.standard_normal((fan_in, fan_out)) / math.sqrt(fan_in)

    def small(*shape: int) -> np.ndarray:
        return 0.1 * rng.standard_normal(shape)

    flat = {"patch_w": weight(flat_patch, d), "patch_b": small(d),
            "pos": small(num_patches(dims), d)}
    for i in range(dims["depth"]):
        flat.update({
            block_key(i, "ln1_g"): 1 + small(d), block_key(i, "ln1_b"): small(d),
            block_key(i, "qkv_w"): weight(d, 3 * d), block_key(i, "qkv_b"): small(3 * d),
            block_key(i, "proj_w"): weight(d, d), block_key(i, "proj_b"): small(d),
            block_key(i, "ln2_g"): 1 + small(d), block_key(i, "ln2_b"): small(d),
            block_key(i, "fc1_w"): weight(d, m), block_key(i, "fc1_b"): small(m),
            block_key(i, "fc2_w"): weight(m, d), block_key(i, "fc2_b"): small(d),
        })
    flat.update({"ln_g": 1 + small(d), "ln_b": small(d),
                 "head_w": weight(d, k), "head_b": small(k)})
    return flat


# -- the float64 reference (autograd.numpy) ----------------------------------------------------

def logsumexp(x: Any, axis: int) -> Any:
    # The shift is a constant (getval strips autograd's box): logsumexp does not depend on it.
    shift = np.max(getval(x), axis=axis, keepdims=True)
    return shift + anp.log(anp.sum(anp.exp(x - shift), axis=axis, keepdims=True))


def patchify(x: Any, patch: int) -> Any:
    b, s, _, c = x.shape
    g = s // patch
    x = anp.reshape(x, (b, g, patch, g, patch, c))
    return anp.reshape(anp.transpose(x, (0, 1, 3, 2, 4, 5)), (b, g * g, patch * patch * c))


def layer_norm(h: Any, g: Any, b: Any) -> Any:
    centred = h - anp.mean(h, axis=-1, keepdims=True)
    var = anp.mean(centred * centred, axis=-1, keepdims=True)
    return centred / anp.sqrt(var + LN_EPS) * g + b


def gelu(h: Any) -> Any:
    return 0.5 * h * (1.0 + anp.tanh(GELU_C * (h + 0.044715 * h ** 3)))


def dense(h: Any, w: Any, b: Any) -> Any:
    # One 2-D matmul over all tokens: autograd's VJP of a broadcast (B, N, D) @ (D, E) would
    # build a (B, D, E) stack of weight gradients before summing it.
    out = anp.dot(anp.reshape(h, (-1, h.shape[-1])), w) + b
    return anp.reshape(out, h.shape[:-1] + (w.shape[1],))


def split_heads(t: Any, heads: int) -> Any:
    b, n, d = t.shape
    return anp.transpose(anp.reshape(t, (b, n, heads, d // heads)), (0, 2, 1, 3))


def attention(a: Any, blk: Mapping[str, Any], heads: int) -> Any:
    b, n, d = a.shape
    # q, k, v from column slices of qkv_w: the same numbers as slicing a @ qkv_w, but autograd
    # then scatters gradients into the small weight, not into the activations.
    w, bias = blk["qkv_w"], blk["qkv_b"]
    q, k, v = (split_heads(dense(a, w[:, i * d:(i + 1) * d], bias[i * d:(i + 1) * d]), heads)
               for i in range(3))
    scores = anp.matmul(q, anp.swapaxes(k, -1, -2)) / math.sqrt(d // heads)
    weights = anp.exp(scores - logsumexp(scores, axis=-1))
    out = anp.reshape(anp.transpose(anp.matmul(weights, v), (0, 2, 1, 3)), (b, n, d))
    return dense(out, blk["proj_w"], blk["proj_b"])


def forward(tree: Mapping[str, Any], x: Any, patch: int, heads: int) -> Any:
    h = dense(patchify(x, patch), tree["patch_w"], tree["patch_b"]) + tree["pos"]
    for blk in tree["blocks"]:
        h = h + attention(layer_norm(h, blk["ln1_g"], blk["ln1_b"]), blk, heads)
        hidden = gelu(dense(layer_norm(h, blk["ln2_g"], blk["ln2_b"]), blk["fc1_w"], blk["fc1_b"]))
        h = h + dense(hidden, blk["fc2_w"], blk["fc2_b"])
    pooled = anp.mean(layer_norm(h, tree["ln_g"], tree["ln_b"]), axis=1)
    return anp.dot(pooled, tree["head_w"]) + tree["head_b"]


def _require_autograd() -> None:
    if autograd is None:
        pytest.skip("the vit reference is differentiated by autograd: "
                    "pip install 'pytest-mlbench[autograd]'")


def _loss(p: Mapping[str, Any], d: Mapping[str, np.ndarray]) -> Any:
    patch, heads = config(p["patch_w"].shape, d["x"].shape)
    logits = forward(to_model(p), d["x"], patch, heads)
    log_probs = logits - logsumexp(logits, axis=-1)
    return -anp.mean(anp.sum(d["y"] * log_probs, axis=-1))


def config(patch_w: tuple[int, ...], x: tuple[int, ...]) -> tuple[int, int]:
    """Patch size and head count from the shapes of ``patch_w`` and the images (models are
    given no dims): a patch holds P*P*C inputs, and a head is head_dim(width) wide."""
    width = int(patch_w[1])
    return math.isqrt(int(patch_w[0]) // int(x[-1])), width // head_dim(width)


# (loss, grad) by the digest of params and data: the harness asks for the same points several
# times per case and every case of one precision asks for the same ones, while autograd's
# float64 ViT is the slowest part of a default-size case. Only ``grad`` fills it.
_CACHE: dict[str, tuple[float, Arrays]] = {}
_CACHE_SIZE = 8


def loss(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> float:
    _require_autograd()
    hit = _CACHE.get(digest(p, d))
    return hit[0] if hit else float(_loss(dict(p), d))


def grad(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> Arrays:
    """Reverse mode by autograd through the float64 forward above."""
    _require_autograd()
    key = digest(p, d)
    if key not in _CACHE:
        value, g = autograd.value_and_grad(_loss)(dict(p), d)
        _CACHE[key] = float(value), g
        while len(_CACHE) > _CACHE_SIZE:
            del _CACHE[next(iter(_CACHE))]  # the oldest entry
    return {k: v.copy() for k, v in _CACHE[key][1].items()}


# -- the model once more, in the Python array API (xp: numpy, jax.numpy, torch) ---------------

def _api_patchify(xp: Any, x: Any, patch: int) -> Any:
    b, s, _, c = x.shape
    g = s // patch
    x = xp.permute_dims(xp.reshape(x, (b, g, patch, g, patch, c)), (0, 1, 3, 2, 4, 5))
    return xp.reshape(x, (b, g * g, patch * patch * c))


def _api_layer_norm(xp: Any, h: Any, g: Any, b: Any) -> Any:
    centred = h - xp.mean(h, axis=-1, keepdims=True)
    var = xp.mean(centred * centred, axis=-1, keepdims=True)
    return centred / xp.sqrt(var + LN_EPS) * g + b


def _api_softmax(xp: Any, s: Any) -> Any:
    e = xp.exp(s - xp.max(s, axis=-1, keepdims=True))
    return e / xp.sum(e, axis=-1, keepdims=True)


def _api_attention(xp: Any, a: Any, blk: Mapping[str, Any], heads: int) -> Any:
    b, n, d = a.shape
    qkv = xp.reshape(a @ blk["qkv_w"] + blk["qkv_b"], (b, n, 3, heads, d // heads))
    qkv = xp.permute_dims(qkv, (2, 0, 3, 1, 4))  # (3, B, heads, N, d_head)
    q, k, v = qkv[0, ...], qkv[1, ...], qkv[2, ...]
    weights = _api_softmax(xp, q @ xp.matrix_transpose(k) / math.sqrt(d // heads))
    return xp.reshape(xp.permute_dims(weights @ v, (0, 2, 1, 3)), (b, n, d)) @ blk["proj_w"] \
        + blk["proj_b"]


def api_forward(xp: Any, p: Mapping[str, Any], d: Mapping[str, Any]) -> Any:
    """Logits (B, classes) from the flat params and NHWC images, in the array API."""
    tree, x = to_model(p), d["x"]
    patch, heads = config(tree["patch_w"].shape, x.shape)
    h = _api_patchify(xp, x, patch) @ tree["patch_w"] + tree["patch_b"] + tree["pos"]
    for blk in tree["blocks"]:
        h = h + _api_attention(xp, _api_layer_norm(xp, h, blk["ln1_g"], blk["ln1_b"]), blk,
                               heads)
        a = _api_layer_norm(xp, h, blk["ln2_g"], blk["ln2_b"]) @ blk["fc1_w"] + blk["fc1_b"]
        gelu = 0.5 * a * (1.0 + xp.tanh(GELU_C * (a + 0.044715 * a * a * a)))
        h = h + gelu @ blk["fc2_w"] + blk["fc2_b"]
    pooled = xp.mean(_api_layer_norm(xp, h, tree["ln_g"], tree["ln_b"]), axis=1)
    return pooled @ tree["head_w"] + tree["head_b"]


def api_objective(xp: Any, logits: Any, d: Mapping[str, Any]) -> Any:
    """The loss on these logits (mean softmax cross-entropy against one-hot y)."""
    shifted = logits - xp.max(logits, axis=-1, keepdims=True)
    log_probs = shifted - xp.log(xp.sum(xp.exp(shifted), axis=-1, keepdims=True))
    return -xp.mean(xp.sum(d["y"] * log_probs, axis=-1))


def flops(dims: Mapping[str, int]) -> int:
    """Matmul FLOPs only (LayerNorm, softmax, GELU and the SGD update are left out). Forward per
    block, with T = B N tokens: qkv 6TD^2, scores and scores @ V 4TND, proj 2TD^2, MLP 4TDM.
    Backward takes two matmuls per forward matmul (input and weight gradients), so 3x forward,
    except the patch embedding, whose input (the image) needs no gradient: 2x.

    Against the 6 P T + 12 L N D T rule (PaLM's appendix B, nanoGPT's estimate_mfu; T tokens,
    P the matmul parameters): the blocks' P = L (4 D^2 + 2 D M) give 6 P T = 3 L (8 T D^2 +
    4 T D M) and the attention 12 L N D T = 3 L (4 T N D), term for term. The rule would
    also charge the patch embedding 6 P^2 C D a token where this charges 4 (no gradient of the
    images) and the head 6 D K a token where this charges 6 D K an image (it sees the pooled
    token only): at ViT-B/16 with 196 patches the rule counts 1.4% more."""
    b, n, d, m = dims["batch"], num_patches(dims), dims["dim"], dims["mlp"]
    t, flat_patch = b * n, dims["patch"] ** 2 * dims["channels"]
    block = 6 * t * d * d + 4 * t * n * d + 2 * t * d * d + 4 * t * d * m
    head = 2 * b * d * dims["classes"]
    return 2 * (2 * t * flat_patch * d) + 3 * (dims["depth"] * block + head)


def size(batch: int, image: int, dim: int, depth: int, mlp: int, patch: int = 4,
         classes: int = 10) -> dict[str, int]:
    return {"batch": batch, "image": image, "patch": patch, "channels": 3, "dim": dim,
            "depth": depth, "mlp": mlp, "classes": classes}


# jit+cudnn: cuDNN's fused attention takes bfloat16 or float16 on an NVIDIA GPU, nothing else
CUDNN_ONLY = {("jit+cudnn", "cpu"): "cuDNN's fused attention (jit+cudnn) runs on NVIDIA GPUs only",
              **{("jit+cudnn", p): f"cuDNN's fused attention (jit+cudnn) takes bfloat16 or "
                                   f"float16, not {p}'s float32 or float64"
                 for p in ("fp64", "fp32", "tf32")}}


SPEC = Workload(
    name="vit",
    summary=__doc__.splitlines()[0],
    sizes={
        # 8x8 images, 4 patches of 4x4, 2 heads, 1 block: seconds on a CPU
        "smoke": (Shape(size(batch=8, image=8, dim=32, depth=1, mlp=64)),),
        # CIFAR-sized: 32x32 images, 64 patches, 4 heads, 4 blocks
        "default": (Shape(size(batch=32, image=32, dim=64, depth=4, mlp=128)),),
        # ViT-Tiny width (192, MLP 768) at 6 blocks and 12 heads of 16
        "paper": (Shape(size(batch=64, image=32, dim=192, depth=6, mlp=768), "tiny"),),
        # ViT-B/16 (86M parameters: 224 x 224 images, 196 patches of 16 x 16, 12 blocks of
        # 768, 12 heads of 64, MLP 3072; ImageNet's 1000 classes; mean-pooled, no class
        # token), 64 images a step: 6.7 TFLOP; for one GPU, in bf16 mixed precision (amp)
        # against the float32 oracles on the device (docs/GPU.md)
        "gpu": (Shape(size(batch=64, image=224, dim=768, depth=12, mlp=3072, patch=16,
                           classes=1000), "b16", devices=("gpu",), reference="float32"),),
    },
    learning_rate=5e-2,
    make_data=make_data,
    make_params=make_params,
    loss=loss,
    grad=grad,
    # the array-API model: the gpu size's float32 reference (the oracles'), vit_infer's
    forward=api_forward,
    objective=api_objective,
    flops_per_step=flops,
    # the patch embedding, six matmuls a block (as gpt's), the head
    depth=lambda d: 6 * d["depth"] + 2,
    # Under amp, a bias's gradient is a sum over every token of the batch; JAX reduces that
    # sum (the transpose of the broadcast add) at the cotangent's bfloat16, where torch and
    # TensorFlow accumulate at float32: JAX's fc2_b gradient at the default size is 25% off in
    # norm (2026-11-26; a 2048-term sum alone: 1.1% against jnp.sum's 0.2%), over the depth
    # rule's 12%
    tolerances={"amp": Tolerances(grad=Tolerance(0.2, 0.2), trajectory=Tolerance(0.3, 0.3))},
    # parallel cases (--mlbench-workers above 1, docs/DISTRIBUTED.md); Megatron's split of a
    # block's MLP, as gpt's (the fused qkv weight's even column split is not head-aligned)
    parallel={s: {"jax": "jit", "torch": "eager", "tensorflow": "jit"}
              for s in ("dp", "fsdp", "tp")},
    tensor_parallel={"*fc1_w": 1, "*fc1_b": 0, "*fc2_w": 0},
    # +sdpa: the attention through the framework's fused call (F.scaled_dot_product_attention,
    # jax.nn.dot_product_attention: XLA's) instead of written out; +cudnn: JAX's call with
    # cuDNN's fused flash attention (a GPU, bfloat16); +nn, +flax, +keras: the model as
    # the framework's layer library (torch.nn modules, Flax Linen, Keras layers with Keras's
    # MultiHeadAttention): one comparison group (IDIOMS.md)
    implementations={
        "jax": ("eager", "jit", "jit+sdpa", "jit+cudnn", "jit+donate", "jit+flax"),
        "torch": ("eager", "jit", "xla", "eager+sdpa", "jit+sdpa", "eager+nn", "jit+nn"),
        "tensorflow": ("eager", "jit", "xla", "xla+sdpa", "xla+keras"),
    },
    unsupported=CUDNN_ONLY,
)
