"""ViT in PyTorch: ``forward(params, data)`` on the spec's model tree (spec.to_model); the
builder steps it with torch.optim, eager or with the whole step under torch.compile. Variants
eager+nn, jit+nn: the model in torch.nn modules (an nn.Linear patch embedding, the positions an
nn.Parameter, nn.TransformerEncoderLayer blocks, nn.LayerNorm, an nn.Linear head), applied to
the spec's weights by torch.func.functional_call; nn.Linear and nn.MultiheadAttention hold
their weights as (out, in), the spec's transposed."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

spec = load_suite_file(Path(__file__).with_name("spec.py"))


def patchify(x: Any, patch: int) -> Any:
    b, s, _, c = x.shape
    g = s // patch
    x = x.reshape(b, g, patch, g, patch, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b, g * g, patch * patch * c)


def layer_norm(h: Any, g: Any, b: Any) -> Any:
    return F.layer_norm(h, h.shape[-1:], g, b, eps=spec.LN_EPS)


def written_out(q: Any, k: Any, v: Any) -> Any:
    """softmax(Q K^T / sqrt(d_head)) V, op by op; each (B, heads, N, d_head)."""
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1) @ v


def sdpa(q: Any, k: Any, v: Any) -> Any:
    """The same through torch's fused scaled_dot_product_attention (variants eager+sdpa,
    jit+sdpa)."""
    return F.scaled_dot_product_attention(q, k, v)


def attention(a: Any, blk: dict[str, Any], heads: int, attend: Any = written_out) -> Any:
    b, n, d = a.shape
    qkv = (a @ blk["qkv_w"] + blk["qkv_b"]).reshape(b, n, 3, heads, d // heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, heads, N, d_head)
    out = attend(q, k, v).transpose(1, 2).reshape(b, n, d)
    return out @ blk["proj_w"] + blk["proj_b"]


def logits(params: dict[str, Any], x: Any, patch: int, heads: int,
           attend: Any = written_out) -> Any:
    """Logits (B, classes) from the model tree (spec.to_model) and NHWC images."""
    h = patchify(x, patch) @ params["patch_w"] + params["patch_b"] + params["pos"]
    for blk in params["blocks"]:
        h = h + attention(layer_norm(h, blk["ln1_g"], blk["ln1_b"]), blk, heads, attend)
        a = layer_norm(h, blk["ln2_g"], blk["ln2_b"]) @ blk["fc1_w"] + blk["fc1_b"]
        h = h + F.gelu(a, approximate="tanh") @ blk["fc2_w"] + blk["fc2_b"]
    pooled = layer_norm(h, params["ln_g"], params["ln_b"]).mean(dim=1)
    return pooled @ params["head_w"] + params["head_b"]


def model(attend: Any) -> tuple[Any, Any]:
    """``(forward, loss)`` with ``attend`` as the attention core."""

    def forward(params: dict[str, Any], data: dict[str, Any]) -> Any:
        x = data["x"]
        return logits(params, x, *spec.config(params["patch_w"].shape, x.shape), attend)

    def loss(params: dict[str, Any], data: dict[str, Any]) -> Any:
        """Mean softmax cross-entropy of the model tree on one batch (or one data-parallel
        shard)."""
        return -(data["y"] * torch.log_softmax(forward(params, data), dim=-1)).sum(dim=-1).mean()

    return forward, loss


# -- the nn idiom: torch.nn modules -----------------------------------------------------------

def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


def encoder_layer(d: int, mlp: int) -> nn.TransformerEncoderLayer:
    """A pre-norm block. Its activation is a function, not nn.GELU(approximate="tanh"): the
    layer's fused fast path (eval mode, no gradient wanted: vit_infer) takes any nn.GELU for
    the exact erf GELU, ignoring ``approximate`` (torch 2.13: 1.5e-4 off at float64, another
    model); with a function the layer never takes that path, at every precision, and its
    self-attention may still take nn.MultiheadAttention's own fast path."""
    return nn.TransformerEncoderLayer(d, d // spec.head_dim(d), mlp, dropout=0.0,
                                      activation=gelu_tanh, layer_norm_eps=spec.LN_EPS,
                                      batch_first=True, norm_first=True)


class ViT(nn.Module):
    def __init__(self, flat_patch: int, patches: int, d: int, depth: int, mlp: int,
                 classes: int) -> None:
        super().__init__()
        self.patch = nn.Linear(flat_patch, d)
        self.pos = nn.Parameter(torch.zeros(patches, d))
        self.blocks = nn.ModuleList(encoder_layer(d, mlp) for _ in range(depth))
        self.norm = nn.LayerNorm(d, eps=spec.LN_EPS)
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor, patch: int) -> torch.Tensor:
        h = self.patch(patchify(x, patch)) + self.pos
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h).mean(dim=1))


# spec name -> (ViT's parameter name, whether nn holds it transposed); blocks by block_names
GLOBAL_NAMES = {"patch_w": ("patch.weight", True), "patch_b": ("patch.bias", False),
                "pos": ("pos", False), "ln_g": ("norm.weight", False),
                "ln_b": ("norm.bias", False), "head_w": ("head.weight", True),
                "head_b": ("head.bias", False)}
BLOCK_NAMES = {"ln1_g": ("norm1.weight", False), "ln1_b": ("norm1.bias", False),
               "qkv_w": ("self_attn.in_proj_weight", True),
               "qkv_b": ("self_attn.in_proj_bias", False),
               "proj_w": ("self_attn.out_proj.weight", True),
               "proj_b": ("self_attn.out_proj.bias", False),
               "ln2_g": ("norm2.weight", False), "ln2_b": ("norm2.bias", False),
               "fc1_w": ("linear1.weight", True), "fc1_b": ("linear1.bias", False),
               "fc2_w": ("linear2.weight", True), "fc2_b": ("linear2.bias", False)}


def names(depth: int) -> dict[str, tuple[str, bool]]:
    found = dict(GLOBAL_NAMES)
    for i in range(depth):
        found.update({spec.block_key(i, k): (f"blocks.{i}.{name}", t)
                      for k, (name, t) in BLOCK_NAMES.items()})
    return found


def depth_of(tree: dict[str, Any]) -> int:
    return sum(1 for name in tree if name.endswith(".norm1.weight"))


def to_module(flat: dict[str, Any]) -> dict[str, Any]:
    """The spec's flat params as ViT's named parameters, for functional_call; the modules for
    their shapes, dtype and device are made here, outside any torch.compile trace."""
    spec.to_model(flat)  # the names checked: a missing or unexpected one raises
    tree = {name: flat[k].T.contiguous() if t else flat[k]
            for k, (name, t) in names(spec.depth_of(flat)).items()}
    for training in (True, False):
        vit_for(tree, training)
    return tree


def from_module(tree: dict[str, Any]) -> dict[str, Any]:
    return {k: tree[name].T if t else tree[name]
            for k, (name, t) in names(depth_of(tree)).items()}


# ViT modules by shapes, dtype, device and mode: made once each, their own initial weights
# never used (functional_call runs them on the given tensors). A plain dict, not
# functools.lru_cache, which dynamo would trace through (making modules in the graph).
MODULES: dict[tuple[Any, ...], ViT] = {}


def vit_for(tree: dict[str, Any], training: bool) -> ViT:
    """Train mode where the weights take gradients (a trainer's nn.Parameters), eval mode for
    inference, as a torch user switches them; dropout is 0, so only the fast paths differ."""
    w, pos, head = tree["patch.weight"], tree["pos"], tree["head.weight"]
    depth = depth_of(tree)
    mlp = tree["blocks.0.linear1.weight"].shape[0] if depth else 0
    key = (w.shape[1], *pos.shape, depth, mlp, head.shape[0], w.dtype, w.device, training)
    if key not in MODULES:
        made = ViT(*key[:6]).to(device=w.device, dtype=w.dtype).train(training)
        # placeholders: not trained and not read, so out of any count of trainable weights
        MODULES[key] = made.requires_grad_(False)
    return MODULES[key]


def nn_forward(tree: dict[str, Any], data: dict[str, Any]) -> Any:
    x = data["x"]
    patch, _ = spec.config(tree["patch.weight"].shape[::-1], x.shape)
    training = torch.is_grad_enabled() and any(t.requires_grad for t in tree.values())
    return torch.func.functional_call(vit_for(tree, training), tree, (x, patch))


def nn_loss(tree: dict[str, Any], data: dict[str, Any]) -> Any:
    return -(data["y"] * torch.log_softmax(nn_forward(tree, data), dim=-1)).sum(dim=-1).mean()


forward, loss = model(written_out)
build = functional.torch(forward, loss, to_model=spec.to_model, from_model=spec.from_model,
                         idioms={"sdpa": model(sdpa),
                                 "nn": (nn_forward, nn_loss, to_module, from_module)})
