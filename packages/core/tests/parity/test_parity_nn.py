"""Parity with torch for the neural-network ops, tinygrad.nn layers and tinygrad.nn.optim optimizers: forward values and
gradients of every float input (see helpers.check), and several optimizer steps against torch.optim."""
from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Tensor, dtypes, nn
from tinygrad.nn import optim

from .helpers import check, compare, make_inputs, torch  # skips this module when torch is missing

F = torch.nn.functional


@pytest.fixture
def training():
  old = Tensor.training
  Tensor.training = True
  yield
  Tensor.training = old


# ---- matmul / einsum
@pytest.mark.parametrize("a,b", [((3, 4), (4, 5)), ((2, 3, 4), (4, 2)), ((4,), (4, 3)), ((3, 4), (4,)), ((2, 1, 3, 4), (3, 4, 2))])
def test_matmul(a, b):
  check(lambda x, y: x @ y, [a, b])


def test_linear_fn():
  check(lambda x, w, b: x.linear(w.T, b), [(3, 4), (5, 4), (5,)], torch_fn=lambda x, w, b: F.linear(x, w, b))


EINSUMS = [("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
           ("i,i", [(4,), (4,)]), ("ij->ji", [(2, 3)]), ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 2)]), ("ij,kj", [(2, 3), (4, 3)]),
           ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 2, 4)]), ("i,j->ij", [(2,), (3,)]), ("ijk->", [(2, 3, 2)]), ("iij->j", [(2, 2, 3)]),
           ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 4)]), ("b...,b...->b", [(2, 3, 2), (2, 3, 2)]), ("ij, j ->i", [(2, 3), (3,)])]


@pytest.mark.parametrize("formula,shapes", EINSUMS, ids=[f for f, _ in EINSUMS])
def test_einsum(formula, shapes):
  check(lambda *xs: Tensor.einsum(formula, *xs), shapes, torch_fn=lambda *xs: torch.einsum(formula, *xs))


# ---- convolution
CONVS = [  # (x shape, w shape, kwargs)
  ((1, 2, 5, 5), (3, 2, 3, 3), {}),
  ((2, 2, 5, 5), (3, 2, 3, 3), {"padding": 1}),
  ((1, 2, 6, 6), (2, 2, 3, 3), {"stride": 2}),
  ((1, 2, 7, 7), (2, 2, 3, 3), {"dilation": 2}),
  ((1, 4, 5, 5), (4, 2, 3, 3), {"groups": 2}),
  ((1, 4, 5, 5), (4, 1, 3, 3), {"groups": 4, "padding": 1}),
  ((1, 2, 5, 6), (3, 2, 2, 3), {"padding": (1, 0), "stride": (2, 1)}),
  ((1, 2, 5, 5), (2, 2, 3, 3), {"padding": "same"}),
  ((1, 2, 6, 6), (2, 2, 2, 2), {"padding": "same"}),
  ((1, 2, 5, 5), (2, 2, 3, 3), {"padding": "valid"}),
  ((1, 2, 7, 7), (2, 2, 3, 3), {"stride": 2, "dilation": 2, "padding": 2}),
  ((2, 2, 8), (3, 2, 3), {"padding": 1}),
  ((1, 2, 9), (2, 2, 3), {"stride": 3, "dilation": 2}),
  ((1, 1, 4, 4, 4), (2, 1, 2, 2, 2), {"padding": 1, "stride": 2}),
]


@pytest.mark.parametrize("xs,ws,kw", CONVS)
def test_conv(xs, ws, kw):
  tfn = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(xs)]
  check(lambda x, w, b: x.conv2d(w, b, **kw), [xs, ws, (ws[0],)], torch_fn=lambda x, w, b: tfn(x, w, b, **kw), atol=1e-4)


def test_conv_no_bias():
  check(lambda x, w: x.conv2d(w, padding=1), [(1, 2, 4, 4), (2, 2, 3, 3)], torch_fn=lambda x, w: F.conv2d(x, w, padding=1))


def test_conv_flat_padding():
  # tinygrad's 2*ndim padding is torch F.pad order: (left, right, top, bottom)
  check(lambda x, w: x.conv2d(w, padding=(1, 0, 2, 1)), [(1, 1, 4, 4), (2, 1, 3, 3)],
        torch_fn=lambda x, w: F.conv2d(F.pad(x, (1, 0, 2, 1)), w))


CONVT = [
  ((1, 2, 3, 3), (2, 3, 3, 3), {}),
  ((1, 2, 3, 3), (2, 3, 3, 3), {"stride": 2}),
  ((1, 2, 4, 4), (2, 2, 3, 3), {"stride": 2, "padding": 1}),
  ((1, 2, 3, 3), (2, 2, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
  ((1, 2, 3, 3), (2, 2, 2, 2), {"dilation": 2}),
  ((1, 4, 3, 3), (4, 1, 3, 3), {"groups": 2, "stride": 2}),
  ((1, 2, 3, 4), (2, 2, 2, 3), {"stride": (2, 1), "padding": (0, 1)}),
  ((2, 2, 5), (2, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
]


@pytest.mark.parametrize("xs,ws,kw", CONVT)
def test_conv_transpose(xs, ws, kw):
  tfn = {3: F.conv_transpose1d, 4: F.conv_transpose2d}[len(xs)]
  cout = ws[1] * kw.get("groups", 1)
  check(lambda x, w, b: x.conv_transpose2d(w, b, **kw), [xs, ws, (cout,)], torch_fn=lambda x, w, b: tfn(x, w, b, **kw), atol=1e-4)


# ---- pooling
AVG = [((1, 2, 4, 4), {}), ((1, 1, 5, 5), {"kernel_size": 3, "stride": 1}), ((1, 1, 5, 5), {"kernel_size": 3, "stride": 2, "padding": 1}),
       ((1, 1, 5, 5), {"kernel_size": 2, "ceil_mode": True}), ((1, 1, 5, 5), {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}),
       ((1, 1, 6, 6), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
       ((1, 1, 6, 6), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}),
       ((1, 1, 5, 4), {"kernel_size": (2, 3), "stride": (1, 2)})]


@pytest.mark.parametrize("xs,kw", AVG)
def test_avg_pool2d(xs, kw):
  tkw = {"kernel_size": 2, **kw}
  check(lambda x: x.avg_pool2d(**kw), [xs], torch_fn=lambda x: F.avg_pool2d(x, **tkw))


def test_avg_pool1d():
  check(lambda x: x.avg_pool2d(kernel_size=(3,), stride=2, padding=1), [(1, 2, 7)],
        torch_fn=lambda x: F.avg_pool1d(x, 3, stride=2, padding=1))


MAXP = [((1, 2, 4, 4), {}), ((1, 1, 5, 5), {"kernel_size": 3, "stride": 2, "padding": 1}), ((1, 1, 7, 7), {"kernel_size": 2, "dilation": 2}),
        ((1, 1, 5, 5), {"kernel_size": 2, "ceil_mode": True}), ((1, 1, 6, 6), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
        ((1, 1, 5, 5), {"kernel_size": 3, "stride": 1}), ((1, 1, 4, 6), {"kernel_size": (2, 3), "stride": (2, 1), "padding": (1, 0)})]


@pytest.mark.parametrize("xs,kw", MAXP)
def test_max_pool2d(xs, kw):
  tkw = {"kernel_size": 2, **kw}
  check(lambda x: x.max_pool2d(**kw), [xs], torch_fn=lambda x: F.max_pool2d(x, **tkw))


def test_max_pool1d():
  check(lambda x: x.max_pool2d(kernel_size=(3,), stride=2), [(1, 2, 7)], torch_fn=lambda x: F.max_pool1d(x, 3, stride=2))


@pytest.mark.parametrize("kw", [{}, {"kernel_size": 3, "stride": 2, "padding": 1}, {"kernel_size": 2, "ceil_mode": True}])
def test_max_pool2d_indices(kw):
  x = make_inputs([(1, 2, 5, 5)])[0]
  out, idx = Tensor(x).max_pool2d(**kw, return_indices=True)
  tout, tidx = F.max_pool2d(torch.tensor(x), **{"kernel_size": 2, **kw}, return_indices=True)
  compare(out, tout, 0, 0, "values")
  compare(idx, tidx, 0, 0, "indices")


@pytest.mark.parametrize("kw", [{}, {"kernel_size": 3, "stride": 2, "padding": 1}])
def test_max_unpool2d(kw):
  x = make_inputs([(1, 2, 5, 5)])[0]
  tkw = {"kernel_size": 2, **kw}
  out, idx = Tensor(x).max_pool2d(**kw, return_indices=True)
  tout, tidx = F.max_pool2d(torch.tensor(x), **tkw, return_indices=True)
  check(lambda v: v.max_unpool2d(idx, **kw, output_size=(5, 5)), [], inputs=[out.numpy()],
        torch_fn=lambda v: F.max_unpool2d(v, tidx, **tkw, output_size=(5, 5)))


# ---- interpolation
INTERP = [((1, 1, 3, 3), (6, 6), "nearest", False), ((1, 1, 6, 6), (4, 3), "nearest", False), ((1, 1, 3, 5), (7, 4), "nearest-exact", False),
          ((1, 2, 3, 3), (5, 6), "bilinear", False), ((1, 2, 3, 3), (5, 6), "bilinear", True), ((1, 1, 6, 5), (3, 2), "bilinear", False),
          ((1, 1, 6, 5), (3, 2), "bilinear", True), ((1, 2, 4), (7,), "linear", False), ((1, 1, 2, 3, 2), (3, 4, 3), "trilinear", False),
          ((1, 1, 3, 3), (1, 4), "bilinear", True)]


@pytest.mark.parametrize("xs,size,mode,ac", INTERP)
def test_interpolate(xs, size, mode, ac):
  tkw = {"align_corners": ac} if "linear" in mode else {}
  check(lambda x: x.interpolate(size, mode=mode, align_corners=ac), [xs], torch_fn=lambda x: F.interpolate(x, size=size, mode=mode, **tkw))


# ---- normalization
@pytest.mark.parametrize("axis", [-1, (-2, -1)])
def test_layernorm_fn(axis):
  shape = (3, 4) if axis == -1 else (3, 2, 4)
  ns = shape[-1:] if axis == -1 else shape[-2:]
  check(lambda x: x.layernorm(axis), [(2, *shape)], torch_fn=lambda x: F.layer_norm(x, ns))


def test_rms_norm_fn():
  check(lambda x: x.rms_norm(eps=1e-6), [(3, 5)], torch_fn=lambda x: F.rms_norm(x, (5,), eps=1e-6))


def test_batchnorm_fn():
  def ours(x, w, b, m, v): return x.batchnorm(w, b, m, (v + 1e-5).rsqrt())
  def theirs(x, w, b, m, v): return (x - m.reshape(1, 3, 1, 1)) * w.reshape(1, 3, 1, 1) * (v.reshape(1, 3, 1, 1) + 1e-5).rsqrt() + b.reshape(1, 3, 1, 1)
  check(ours, [(2, 3, 2, 2), (3,), (3,), (3,), (3,)], torch_fn=theirs,
        inputs=[*make_inputs([(2, 3, 2, 2), (3,), (3,), (3,)]), np.array([0.5, 1.0, 2.0], np.float32)])


# ---- attention
def _sdpa(**kw):
  return lambda q, k, v: q.scaled_dot_product_attention(k, v, **kw)


def test_sdpa():
  check(_sdpa(), [(1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)], torch_fn=lambda q, k, v: F.scaled_dot_product_attention(q, k, v))


def test_sdpa_causal():
  check(_sdpa(is_causal=True), [(1, 2, 4, 3), (1, 2, 4, 3), (1, 2, 4, 3)],
        torch_fn=lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_sdpa_causal_rect():
  check(_sdpa(is_causal=True), [(2, 3, 4), (2, 5, 4), (2, 5, 4)], torch_fn=lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_sdpa_bool_mask():
  mask = np.array([[1, 0, 1, 1], [1, 1, 0, 0], [0, 1, 1, 1]], dtype=np.bool_)
  check(lambda q, k, v: q.scaled_dot_product_attention(k, v, attn_mask=Tensor(mask)), [(1, 2, 3, 4), (1, 2, 4, 4), (1, 2, 4, 4)],
        torch_fn=lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(mask)))


def test_sdpa_float_mask():
  check(lambda q, k, v, m: q.scaled_dot_product_attention(k, v, attn_mask=m), [(1, 2, 3, 4), (1, 2, 4, 4), (1, 2, 4, 4), (3, 4)],
        torch_fn=lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m))


def test_sdpa_gqa():
  check(_sdpa(enable_gqa=True), [(1, 4, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)],
        torch_fn=lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))


# ---- losses
LABELS = np.array([0, 2, 1, 3, 2], dtype=np.int64)


@pytest.mark.parametrize("kw", [{}, {"reduction": "sum"}, {"reduction": "none"}, {"label_smoothing": 0.1},
                                {"label_smoothing": 0.2, "reduction": "sum"}])
def test_cross_entropy_indices(kw):
  check(lambda x, y: x.cross_entropy(y, **kw), [(5, 4)], torch_fn=lambda x, y: F.cross_entropy(x, y, **kw), inputs=[make_inputs([(5, 4)])[0], LABELS])


@pytest.mark.parametrize("kw", [{"ignore_index": 2}, {"ignore_index": 2, "label_smoothing": 0.1}, {"ignore_index": 2, "reduction": "sum"}])
def test_cross_entropy_ignore_index(kw):
  check(lambda x, y: x.cross_entropy(y, **kw), [(5, 4)], torch_fn=lambda x, y: F.cross_entropy(x, y, **kw), inputs=[make_inputs([(5, 4)])[0], LABELS])


@pytest.mark.parametrize("ls", [0.0, 0.3])
def test_cross_entropy_probs(ls):
  p = np.random.default_rng(3).dirichlet(np.ones(4), size=3).astype(np.float32)
  check(lambda x, y: x.cross_entropy(y, label_smoothing=ls), [(3, 4)], torch_fn=lambda x, y: F.cross_entropy(x, y, label_smoothing=ls),
        inputs=[make_inputs([(3, 4)])[0], p])


def test_cross_entropy_spatial():
  y = np.random.default_rng(3).integers(0, 3, size=(2, 2, 2)).astype(np.int64)
  check(lambda x, y: x.cross_entropy(y), [(2, 3, 2, 2)], torch_fn=lambda x, y: F.cross_entropy(x, y), inputs=[make_inputs([(2, 3, 2, 2)])[0], y])


@pytest.mark.parametrize("kw,tkw", [({}, {}), ({"label_smoothing": 0.1}, {"label_smoothing": 0.1}), ({"ignore_index": 1}, {"ignore_index": 1}),
                                    ({"reduction": "sum"}, {"reduction": "sum"}), ({"reduction": "none", "ignore_index": 2}, {"reduction": "none", "ignore_index": 2})])
def test_sparse_categorical_crossentropy(kw, tkw):
  check(lambda x, y: x.sparse_categorical_crossentropy(y, **kw), [(5, 4)], torch_fn=lambda x, y: F.cross_entropy(x, y, **tkw),
        inputs=[make_inputs([(5, 4)])[0], LABELS])


def test_sparse_categorical_crossentropy_3d():
  y = np.random.default_rng(2).integers(0, 4, size=(2, 3)).astype(np.int64)
  check(lambda x, y: x.sparse_categorical_crossentropy(y), [(2, 3, 4)], torch_fn=lambda x, y: F.cross_entropy(x.reshape(-1, 4), y.reshape(-1)),
        inputs=[make_inputs([(2, 3, 4)])[0], y])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_crossentropy(reduction):
  check(lambda x, y: x.binary_crossentropy(y, reduction=reduction), [(3, 4), (3, 4)],
        torch_fn=lambda x, y: F.binary_cross_entropy(x, y, reduction=reduction), low=0.05, high=0.95)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_crossentropy_logits(reduction):
  x, y = make_inputs([(3, 4), (3, 4)], low=-6, high=6)
  check(lambda x, y: x.binary_crossentropy_logits(y, reduction=reduction), [], inputs=[x, (y > 0).astype(np.float32)],
        torch_fn=lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction=reduction))


def test_binary_crossentropy_logits_pos_weight():
  w = np.array([0.5, 1.0, 2.0, 3.0], np.float32)
  check(lambda x, y: x.binary_crossentropy_logits(y, pos_weight=Tensor(w)), [(3, 4), (3, 4)], low=0.1, high=2.0,
        torch_fn=lambda x, y: F.binary_cross_entropy_with_logits(x, y, pos_weight=torch.tensor(w)))


@pytest.mark.parametrize("kw", [{}, {"reduction": "sum"}, {"reduction": "none"}, {"ignore_index": 2}, {"weight": True},
                                {"weight": True, "ignore_index": 1}, {"weight": True, "reduction": "sum"}])
def test_nll_loss(kw):
  w = np.array([0.5, 1.0, 2.0, 1.5], np.float32)
  kw = {**kw, "weight": Tensor(w)} if kw.get("weight") else kw
  tkw = {**kw, "weight": torch.tensor(w)} if "weight" in kw else kw
  x = make_inputs([(5, 4)])[0]
  check(lambda x, y: x.log_softmax(1).nll_loss(y, **kw), [], torch_fn=lambda x, y: F.nll_loss(x.log_softmax(1), y, **tkw), inputs=[x, LABELS])


def test_nll_loss_spatial():
  y = np.random.default_rng(3).integers(0, 3, size=(2, 2, 2)).astype(np.int64)
  check(lambda x, y: x.nll_loss(y), [], torch_fn=lambda x, y: F.nll_loss(x, y), inputs=[make_inputs([(2, 3, 2, 2)])[0], y])


# ---- nn layers: copy our parameters into the torch layer, compare outputs and parameter gradients
def _layer_parity(ours, theirs, x: np.ndarray, names: list[str], atol: float = 1e-5, grad_atol: float = 1e-4):
  with torch.no_grad():
    for n in names: getattr(theirs, n).copy_(torch.tensor(getattr(ours, n).numpy()))
  for n in names: getattr(ours, n).requires_grad_(True)
  xo, xt = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
  out_o, out_t = ours(xo), theirs(xt)
  compare(out_o, out_t, atol, 1e-4, "forward")
  up = np.random.default_rng(1).uniform(0.5, 1.5, size=tuple(out_t.shape)).astype(np.float32)
  (out_o * Tensor(up)).sum().backward()
  (out_t * torch.tensor(up)).sum().backward()
  compare(xo.grad, xt.grad, grad_atol, 1e-3, "input gradient")
  for n in names: compare(getattr(ours, n).grad, getattr(theirs, n).grad, grad_atol, 1e-3, f"{n} gradient")


def test_nn_linear():
  _layer_parity(nn.Linear(4, 3), torch.nn.Linear(4, 3), make_inputs([(2, 4)])[0], ["weight", "bias"])


@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": 1}, {"padding": "same", "bias": False}, {"groups": 2, "dilation": 2, "padding": 2}])
def test_nn_conv2d(kw):
  names = ["weight"] + (["bias"] if kw.get("bias", True) else [])
  _layer_parity(nn.Conv2d(2, 4, 3, **kw), torch.nn.Conv2d(2, 4, 3, **kw), make_inputs([(1, 2, 5, 5)])[0], names)


def test_nn_conv1d():
  _layer_parity(nn.Conv1d(2, 3, 3, padding=1), torch.nn.Conv1d(2, 3, 3, padding=1), make_inputs([(2, 2, 6)])[0], ["weight", "bias"])


def test_nn_conv3d():
  _layer_parity(nn.Conv3d(1, 2, 2), torch.nn.Conv3d(1, 2, 2), make_inputs([(1, 1, 3, 3, 3)])[0], ["weight", "bias"])


def test_nn_conv_transpose2d():
  _layer_parity(nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1), torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1),
                make_inputs([(1, 2, 3, 3)])[0], ["weight", "bias"])


def test_nn_layernorm():
  _layer_parity(nn.LayerNorm(4), torch.nn.LayerNorm(4), make_inputs([(2, 3, 4)])[0], ["weight", "bias"])


def test_nn_layernorm_2d_shape():
  ours = nn.LayerNorm((3, 4))
  ours.weight, ours.bias = Tensor(make_inputs([(3, 4)], seed=5)[0]), Tensor(make_inputs([(3, 4)], seed=6)[0])
  _layer_parity(ours, torch.nn.LayerNorm((3, 4)), make_inputs([(2, 3, 4)])[0], ["weight", "bias"])


def test_nn_groupnorm():
  ours = nn.GroupNorm(2, 4)
  ours.weight, ours.bias = Tensor(make_inputs([(4,)], seed=5)[0]), Tensor(make_inputs([(4,)], seed=6)[0])
  _layer_parity(ours, torch.nn.GroupNorm(2, 4), make_inputs([(2, 4, 3, 3)])[0], ["weight", "bias"])


def test_nn_instancenorm():
  ours = nn.InstanceNorm(3)
  ours.weight, ours.bias = Tensor(make_inputs([(3,)], seed=5)[0]), Tensor(make_inputs([(3,)], seed=6)[0])
  _layer_parity(ours, torch.nn.InstanceNorm2d(3, affine=True), make_inputs([(2, 3, 3, 3)])[0], ["weight", "bias"])


def test_nn_rmsnorm():
  ours = nn.RMSNorm(5)
  ours.weight = Tensor(make_inputs([(5,)], seed=5)[0])
  _layer_parity(ours, torch.nn.RMSNorm(5, eps=1e-6), make_inputs([(2, 3, 5)])[0], ["weight"])


def test_nn_embedding():
  ours, theirs = nn.Embedding(6, 3), torch.nn.Embedding(6, 3)
  with torch.no_grad(): theirs.weight.copy_(torch.tensor(ours.weight.numpy()))
  idx = np.array([[0, 5, 2], [2, 2, 1]], dtype=np.int32)
  ours.weight.requires_grad_(True)
  out_o, out_t = ours(Tensor(idx)), theirs(torch.tensor(idx, dtype=torch.long))
  compare(out_o, out_t, 0, 0, "forward")
  out_o.square().sum().backward()
  out_t.square().sum().backward()
  compare(ours.weight.grad, theirs.weight.grad, 1e-5, 1e-5, "weight gradient")


def test_nn_lstmcell():
  ours, theirs = nn.LSTMCell(3, 4), torch.nn.LSTMCell(3, 4)
  names = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
  ours.bias_ih, ours.bias_hh = Tensor(make_inputs([(16,)], seed=5)[0]), Tensor(make_inputs([(16,)], seed=6)[0])
  with torch.no_grad():
    for n in names: getattr(theirs, n).copy_(torch.tensor(getattr(ours, n).numpy()))
  for n in names: getattr(ours, n).requires_grad_(True)
  x, h, c = make_inputs([(2, 3), (2, 4), (2, 4)])
  (ho, co), (ht, ct) = ours(Tensor(x), (Tensor(h), Tensor(c))), theirs(torch.tensor(x), (torch.tensor(h), torch.tensor(c)))
  (ho.sum() + (co * 2).sum()).backward()  # before reading ho/co: realizing them would cut them off the graph
  (ht.sum() + (ct * 2).sum()).backward()
  compare(ho, ht, 1e-5, 1e-4, "h")
  compare(co, ct, 1e-5, 1e-4, "c")
  for n in names: compare(getattr(ours, n).grad, getattr(theirs, n).grad, 1e-4, 1e-3, f"{n} gradient")
  h0, c0 = ours(Tensor(x))
  h0t, c0t = theirs(torch.tensor(x))
  compare(h0, h0t, 1e-5, 1e-4, "h from zero state")


def test_nn_lstmcell_unrolled_training_step(training):
  # 8 positions through one cell, a head on every h, one loss: the backward through time (its kernels once inlined the whole
  # history; schedule/recompute.py stores the shared states), then an Adam step against torch's
  steps = 8
  ours, theirs = nn.LSTMCell(3, 5), torch.nn.LSTMCell(3, 5)
  head_o, head_t = nn.Linear(5, 2), torch.nn.Linear(5, 2)
  with torch.no_grad():
    for n in ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]: getattr(theirs, n).copy_(torch.tensor(getattr(ours, n).numpy()))
    head_t.weight.copy_(torch.tensor(head_o.weight.numpy()))
    head_t.bias.copy_(torch.tensor(head_o.bias.numpy()))
  params_o = [ours.weight_ih, ours.weight_hh, ours.bias_ih, ours.bias_hh, head_o.weight, head_o.bias]
  params_t = [theirs.weight_ih, theirs.weight_hh, theirs.bias_ih, theirs.bias_hh, head_t.weight, head_t.bias]
  opt_o, opt_t = optim.Adam(params_o, lr=0.01), torch.optim.Adam(params_t, lr=0.01)
  (xs,) = make_inputs([(4, steps, 3)], seed=7)
  for _ in range(2):
    hc_o, hc_t, outs_o, outs_t = None, None, [], []
    for t in range(steps):
      hc_o, hc_t = ours(Tensor(xs[:, t]), hc_o), theirs(torch.tensor(xs[:, t]), hc_t)
      outs_o.append(head_o(hc_o[0]))
      outs_t.append(head_t(hc_t[0]))
    loss_o, loss_t = Tensor.stack(*outs_o, dim=1).square().mean(), torch.stack(outs_t, dim=1).square().mean()
    opt_o.zero_grad()
    opt_t.zero_grad()
    loss_o.backward()
    loss_t.backward()
    compare(loss_o, loss_t, 1e-6, 1e-5, "loss")  # before the step: a lazy loss read after it is the loss at the new weights
    for i, (po, pt) in enumerate(zip(params_o, params_t)): compare(po.grad, pt.grad, 1e-5, 1e-3, f"gradient {i}")
    opt_o.step()
    opt_t.step()
  for i, (po, pt) in enumerate(zip(params_o, params_t)): compare(po, pt.detach(), 1e-5, 1e-4, f"parameter {i} after two steps")


def test_nn_batchnorm_train_and_eval(training):
  x = make_inputs([(4, 3, 2, 2)])[0]
  ours, theirs = nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
  ours.weight, ours.bias = Tensor(make_inputs([(3,)], seed=5)[0]), Tensor(make_inputs([(3,)], seed=6)[0])
  _layer_parity(ours, theirs, x, ["weight", "bias"])
  compare(ours.running_mean, theirs.running_mean, 1e-6, 1e-5, "running_mean")
  compare(ours.running_var, theirs.running_var, 1e-6, 1e-5, "running_var")
  assert ours.num_batches_tracked.numpy().item() == 1
  Tensor.training = False
  theirs.eval()
  x2 = make_inputs([(2, 3, 2, 2)], seed=4)[0]
  compare(ours(Tensor(x2)), theirs(torch.tensor(x2)), 1e-5, 1e-4, "eval forward")


def test_nn_batchnorm1d(training):
  ours, theirs = nn.BatchNorm(4, affine=False), torch.nn.BatchNorm1d(4, affine=False)
  x = make_inputs([(5, 4)])[0]
  for _ in range(2): compare(ours(Tensor(x)), theirs(torch.tensor(x)), 1e-5, 1e-4, "forward")
  compare(ours.running_var, theirs.running_var, 1e-6, 1e-5, "running_var")


# ---- optimizers: several steps against torch.optim on the same tiny model
def _run_steps(ours_factory, theirs_factory, steps: int = 4, shapes=((4, 3), (3,)), lossfn: str = "tanh"):
  init = make_inputs(list(shapes), seed=11)
  x = make_inputs([(5, 4)], seed=12)[0]
  ps = [Tensor(a.copy(), requires_grad=True) for a in init]
  tps = [torch.tensor(a.copy(), requires_grad=True) for a in init]
  opt, topt = ours_factory(ps), theirs_factory(tps)

  def loss(X, w, b):
    h = X @ w + b
    return (h.tanh() * h).sum() if lossfn == "tanh" else (h * h).mean()
  for _ in range(steps):
    opt.zero_grad()
    loss(Tensor(x), *ps).backward()
    opt.step()
    topt.zero_grad()
    loss(torch.tensor(x), *tps).backward()
    topt.step()
  for i, (p, t) in enumerate(zip(ps, tps)): compare(p, t, 1e-5, 1e-4, f"parameter {i}")


OPTIMS = {
  "sgd": (lambda p: optim.SGD(p, lr=0.05), lambda p: torch.optim.SGD(p, lr=0.05)),
  "sgd_default_lr": (lambda p: optim.SGD(p), lambda p: torch.optim.SGD(p, lr=0.001)),
  "sgd_momentum": (lambda p: optim.SGD(p, lr=0.05, momentum=0.9), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
  "sgd_nesterov": (lambda p: optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True)),
  "sgd_wd": (lambda p: optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.1), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.1)),
  "adam": (lambda p: optim.Adam(p, lr=0.01), lambda p: torch.optim.Adam(p, lr=0.01)),
  "adam_betas": (lambda p: optim.Adam(p, lr=0.02, b1=0.8, b2=0.99, eps=1e-6), lambda p: torch.optim.Adam(p, lr=0.02, betas=(0.8, 0.99), eps=1e-6)),
  "adamw": (lambda p: optim.AdamW(p, lr=0.01), lambda p: torch.optim.AdamW(p, lr=0.01)),
  "adamw_wd": (lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.3), lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.3)),
  "adam_fused": (lambda p: optim.Adam(p, lr=0.01, fused=True), lambda p: torch.optim.Adam(p, lr=0.01)),
  "sgd_fused": (lambda p: optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01, fused=True),
                lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01)),
}


@pytest.mark.parametrize("name", list(OPTIMS))
def test_optimizer_vs_torch(name, training):
  _run_steps(*OPTIMS[name])


def _ns_float32(grad, ns_coefficients, ns_steps, eps):
  """torch's Newton-Schulz, but in float32 (torch runs it in bfloat16)."""
  a, b, c = ns_coefficients
  g = grad.float()
  if grad.size(0) > grad.size(1): g = g.T
  g = g / (g.norm() + eps)
  for _ in range(ns_steps):
    gram = g @ g.T
    g = a * g + (b * gram + c * gram @ gram) @ g
  return g.T if grad.size(0) > grad.size(1) else g


@pytest.mark.parametrize("shape,kw", [((4, 4), {}), ((3, 5), {"weight_decay": 0.1}), ((4, 4), {"nesterov": False, "momentum": 0.9})])
def test_muon_vs_torch(shape, kw, training, monkeypatch):
  import torch.optim._muon as tmuon
  monkeypatch.setattr(tmuon, "_zeropower_via_newtonschulz", _ns_float32)
  w0 = make_inputs([shape], seed=3)[0]
  x = make_inputs([(6, shape[0])], seed=4)[0]
  w, tw = Tensor(w0.copy(), requires_grad=True), torch.tensor(w0.copy(), requires_grad=True)
  opt = optim.Muon([w], lr=0.02, **{"weight_decay": 0.0, **kw})
  topt = torch.optim.Muon([tw], lr=0.02, weight_decay=kw.get("weight_decay", 0.0), momentum=kw.get("momentum", 0.95), nesterov=kw.get("nesterov", True))
  for _ in range(3):
    opt.zero_grad()
    (Tensor(x) @ w).sin().sum().backward()
    opt.step()
    topt.zero_grad()
    (torch.tensor(x) @ tw).sin().sum().backward()
    topt.step()
  compare(w, tw, 1e-4, 1e-3, "weight")


def test_optimizer_lr_tensor_change(training):
  w, tw = Tensor([1.0, -2.0], requires_grad=True), torch.tensor([1.0, -2.0], requires_grad=True)
  opt, topt = optim.SGD([w], lr=0.1), torch.optim.SGD([tw], lr=0.1)
  for lr in (0.1, 0.01):
    opt.lr.assign(Tensor([lr], dtype=dtypes.float32)).realize()
    for g in topt.param_groups: g["lr"] = lr
    opt.zero_grad()
    (w * w).sum().backward()
    opt.step()
    topt.zero_grad()
    (tw * tw).sum().backward()
    topt.step()
  compare(w, tw, 1e-6, 1e-6, "weight")


def test_small_cnn_training_steps_vs_torch(training):
  """conv -> batchnorm -> relu -> max pool -> linear, three AdamW steps: the weights and running stats follow torch's."""
  # (no conv bias: batchnorm cancels it, its gradient is rounding noise that Adam would blow up to full steps)
  conv, bn, fc = nn.Conv2d(1, 2, 3, padding=1, bias=False), nn.BatchNorm2d(2), nn.Linear(2 * 2 * 2, 3)
  tconv, tbn, tfc = torch.nn.Conv2d(1, 2, 3, padding=1, bias=False), torch.nn.BatchNorm2d(2), torch.nn.Linear(8, 3)
  pairs = [(conv.weight, tconv.weight), (bn.weight, tbn.weight), (bn.bias, tbn.bias), (fc.weight, tfc.weight), (fc.bias, tfc.bias)]
  with torch.no_grad():
    for o, t in pairs: t.copy_(torch.tensor(o.numpy()))
  # the running statistics go in as buffers (requires_grad=False), like tinygrad's get_parameters(model): each step realizes them
  opt = optim.AdamW([o for o, _ in pairs] + [bn.running_mean, bn.running_var, bn.num_batches_tracked], lr=0.01, weight_decay=0.05)
  topt = torch.optim.AdamW([t for _, t in pairs], lr=0.01, weight_decay=0.05)
  x, y = make_inputs([(3, 1, 4, 4)])[0], np.array([0, 2, 1])
  for _ in range(3):
    opt.zero_grad()
    fc(bn(conv(Tensor(x))).relu().max_pool2d(2).reshape(3, -1)).sparse_categorical_crossentropy(Tensor(y)).backward()
    opt.step()
    topt.zero_grad()
    F.cross_entropy(tfc(F.max_pool2d(tbn(tconv(torch.tensor(x))).relu(), 2).reshape(3, -1)), torch.tensor(y)).backward()
    topt.step()
  for i, (o, t) in enumerate(pairs): compare(o, t, 1e-5, 1e-4, f"parameter {i}")
  compare(bn.running_mean, tbn.running_mean, 1e-5, 1e-4, "running_mean")
  compare(bn.running_var, tbn.running_var, 1e-5, 1e-4, "running_var")
