# a Mamba-style selective state-space block, against numpy: a causal depthwise conv1d (left padding, groups), input-
# dependent step sizes by softplus, the discretized decay exp(delta * A) and input delta * B * x; the selective scan
# h_t = exp(delta_t A) h_(t-1) + delta_t B_t x_t four ways (a Python loop over time, the cumsum-of-logs closed form
# exp(logP_t) * cumsum(exp(-logP_s) u_s), cumprod of the decays, the masked quadratic "segment sum" form exp(logP_t -
# logP_s) over s <= t, and Mamba-2's chunked form: the quadratic form inside chunks of 4, the state carried between them),
# equal outputs and equal gradients by the loop and the chunked form; a recurrent decoder (the conv window and the state h
# kept in buffers updated by assign, one token a jitted call) equal to the full-sequence forward; a student block trained
# to imitate a teacher with Adam under TinyJit
import time

import numpy as np
from tinygrad import Tensor, TinyJit
from tinygrad.helpers import Context
from tinygrad.nn.optim import Adam

from bench import chk, finish, report

rng = np.random.default_rng(707)
Bsz, L, D, E, N, R, K, CS = 2, 16, 8, 16, 4, 2, 4, 4
NAMES = ["in_proj", "conv_w", "conv_b", "x_proj", "dt_proj", "dt_b", "A_log", "Dskip", "out_proj"]

def np_params(r):
  return {"in_proj": r.standard_normal((D, 2 * E)) / np.sqrt(D), "conv_w": r.standard_normal((E, 1, K)) / np.sqrt(K),
          "conv_b": r.standard_normal(E) * 0.1, "x_proj": r.standard_normal((E, R + 2 * N)) / np.sqrt(E),
          "dt_proj": r.standard_normal((R, E)) / np.sqrt(R), "dt_b": np.log(np.expm1(r.uniform(0.05, 0.3, E))),
          "A_log": np.log(np.tile(np.arange(1, N + 1) * 0.5, (E, 1))) + r.uniform(-0.1, 0.1, (E, N)),
          "Dskip": np.ones(E) + r.standard_normal(E) * 0.1, "out_proj": r.standard_normal((E, D)) / np.sqrt(E)}

def scan_loop(dA, u):                      # dA: log decays, u: inputs, both (B, L, E, N)
  h = Tensor.zeros(*u.shape[:1], *u.shape[2:]); hs = []
  for t in range(u.shape[1]): h = dA[:, t].exp() * h + u[:, t]; hs.append(h)
  return Tensor.stack(*hs, dim=1)
def scan_cumsum(dA, u):
  lp = dA.cumsum(1)
  return lp.exp() * (u * (-lp).exp()).cumsum(1)
def scan_cumprod(dA, u):
  p = dA.exp().cumprod(1)
  return p * (u / p).cumsum(1)
def segsum_weights(dA, axis):               # exp(logP_t - logP_s) for s <= t, 0 above the diagonal
  lp = dA.cumsum(axis)
  seg = lp.unsqueeze(axis + 1) - lp.unsqueeze(axis)                   # (..., t, s, ...)
  n = dA.shape[axis]
  keep = Tensor.ones(n, n).tril().bool().reshape(*([1] * axis), n, n, *([1] * (dA.ndim - axis - 1)))
  return keep.where(seg, -float("inf")).exp(), lp
def scan_quadratic(dA, u):
  w, _ = segsum_weights(dA, 1)
  return (w * u.unsqueeze(1)).sum(2)
def scan_chunked(dA, u, cs=CS):
  b, n = u.shape[0], u.shape[1]
  dAc, uc = dA.reshape(b, n // cs, cs, *dA.shape[2:]), u.reshape(b, n // cs, cs, *u.shape[2:])
  w, lp = segsum_weights(dAc, 2)
  intra = (w * uc.unsqueeze(2)).sum(3)                               # (B, nc, cs, E, N): each chunk from a zero state
  carry, outs = Tensor.zeros(b, *u.shape[2:]), []
  for c in range(n // cs):
    hc = intra[:, c] + lp[:, c].exp() * carry.unsqueeze(1)
    outs.append(hc); carry = hc[:, -1]
  return Tensor.cat(*outs, dim=1)

class Mamba:
  def __init__(self, p): self.p = {k: Tensor(p[k].astype(np.float32)) for k in NAMES}
  def params(self): return [self.p[k] for k in NAMES]
  def pre(self, x):
    p = self.p
    xi, z = (x @ p["in_proj"]).chunk(2, -1)
    xc = xi.transpose(1, 2).pad((K - 1, 0)).conv2d(p["conv_w"], p["conv_b"], groups=E).transpose(1, 2).silu()   # causal
    dt, Bm, Cm = (xc @ p["x_proj"]).split([R, N, N], -1)
    delta = (dt @ p["dt_proj"] + p["dt_b"]).softplus()
    A = -p["A_log"].exp()
    return xc, z, delta, Bm, Cm, A
  def __call__(self, x, scan=scan_chunked):
    xc, z, delta, Bm, Cm, A = self.pre(x)
    dA = delta.unsqueeze(-1) * A                                     # (B, L, E, N)
    u = (delta * xc).unsqueeze(-1) * Bm.unsqueeze(2)
    h = scan(dA, u)
    y = (h * Cm.unsqueeze(2)).sum(-1) + xc * self.p["Dskip"]
    return (y * z.silu()) @ self.p["out_proj"]

def np_softplus(v): return np.logaddexp(0, v)
def np_silu(v): return v / (1 + np.exp(-v))
def np_mamba(p, x):
  xz = x @ p["in_proj"]; xi, z = xz[..., :E], xz[..., E:]
  xp = np.concatenate([np.zeros((x.shape[0], K - 1, E)), xi], 1)
  xc = np_silu(np.stack([(xp[:, t:t + K] * p["conv_w"][:, 0].T).sum(1) for t in range(x.shape[1])], 1) + p["conv_b"])
  dbc = xc @ p["x_proj"]; dt, Bm, Cm = dbc[..., :R], dbc[..., R:R + N], dbc[..., R + N:]
  delta = np_softplus(dt @ p["dt_proj"] + p["dt_b"]); A = -np.exp(p["A_log"])
  h = np.zeros((x.shape[0], E, N)); ys, hs = [], []
  for t in range(x.shape[1]):
    h = np.exp(delta[:, t, :, None] * A) * h + (delta[:, t] * xc[:, t])[..., None] * Bm[:, t, None, :]
    hs.append(h); ys.append((h * Cm[:, t, None, :]).sum(-1) + xc[:, t] * p["Dskip"])
  y = np.stack(ys, 1) * np_silu(z)
  return y @ p["out_proj"], np.stack(hs, 1)

P = np_params(np.random.default_rng(1))
m = Mamba(P)
x_np = rng.standard_normal((Bsz, L, D)).astype(np.float32)
x = Tensor(x_np)
ref_y, ref_h = np_mamba(P, x_np.astype(np.float64))
xc, z, delta, Bm, Cm, A = m.pre(x)
dA, u = delta.unsqueeze(-1) * A, (delta * xc).unsqueeze(-1) * Bm.unsqueeze(2)
for name, f, tol in [("loop", scan_loop, 1e-5), ("cumsum of logs", scan_cumsum, 1e-4), ("cumprod", scan_cumprod, 1e-4),
                     ("quadratic", scan_quadratic, 1e-5), ("chunked", scan_chunked, 1e-5)]:
  chk(f"states by {name}", f(dA, u), ref_h, tol)
chk("decays in (0, 1)", ((dA.exp() > 0) & (dA.exp() < 1)).all(), True, exact=True)
chk("block output (chunked)", m(x), ref_y, 1e-5)
chk("block output (loop)", m(x, scan_loop), ref_y, 1e-5)
chk("causal: a change at t=9 leaves y[:9]", (m(Tensor(x_np + (np.arange(L) == 9)[None, :, None])) - m(x))[:, :9].abs().max(), 0.0, 1e-6)
out_sum = float(m(x).abs().sum().item())

# gradients: the loop and the chunked form give the same gradients
t_np = rng.standard_normal((Bsz, L, D)).astype(np.float32)
g_loop = [g.numpy() for g in ((m(x, scan_loop) - Tensor(t_np)) ** 2).mean().gradient(*m.params())]
g_chunk = [g.numpy() for g in ((m(x) - Tensor(t_np)) ** 2).mean().gradient(*m.params())]
for name, a, b in zip(NAMES, g_loop, g_chunk): chk(f"grad {name}: loop == chunked", b, a, 1e-5)
# the input's gradient by finite differences of the numpy forward (float64)
gx = ((m(x) - Tensor(t_np)) ** 2).mean().gradient(x)[0].numpy()
eps, fd = 1e-6, []
for (bi, ti, di) in [(0, 0, 0), (1, 7, 3), (0, 15, 5)]:
  xp_, xm_ = x_np.astype(np.float64), x_np.astype(np.float64)
  xp_ = xp_.copy(); xp_[bi, ti, di] += eps; xm_ = xm_.copy(); xm_[bi, ti, di] -= eps
  fd.append((((np_mamba(P, xp_)[0] - t_np) ** 2).mean() - ((np_mamba(P, xm_)[0] - t_np) ** 2).mean()) / (2 * eps))
chk("input grad vs finite differences", gx[[0, 1, 0], [0, 7, 15], [0, 3, 5]], np.array(fd), 1e-4)

# recurrent decoding: conv window (B, E, K) and state (B, E, N) in buffers, one token a jitted call
conv_state, ssm_state = Tensor.zeros(Bsz, E, K).contiguous().realize(), Tensor.zeros(Bsz, E, N).contiguous().realize()
@TinyJit
def decode(xt):                             # xt: (B, D)
  p = m.p
  xi, zt = (xt @ p["in_proj"]).chunk(2, -1)
  win = conv_state[:, :, 1:].cat(xi.unsqueeze(-1), dim=2)
  xct = ((win * p["conv_w"][:, 0]).sum(-1) + p["conv_b"]).silu()
  dt, Bt, Ct = (xct @ p["x_proj"]).split([R, N, N], -1)
  dl = (dt @ p["dt_proj"] + p["dt_b"]).softplus()
  h = (dl.unsqueeze(-1) * -p["A_log"].exp()).exp() * ssm_state + (dl * xct).unsqueeze(-1) * Bt.unsqueeze(1)
  y = ((h * Ct.unsqueeze(1)).sum(-1) + xct * p["Dskip"]) * zt.silu() @ p["out_proj"]
  Tensor.realize(y, conv_state.assign(win.contiguous()), ssm_state.assign(h))
  return y
ys = [decode(Tensor(x_np[:, t].copy())).numpy() for t in range(L)]
chk("recurrent decode == full forward", np.stack(ys, 1), ref_y, 1e-5)
chk("final state", ssm_state, ref_h[:, -1], 1e-5)

# a student block trained to imitate a teacher, Adam under TinyJit
teacher = Mamba(np_params(np.random.default_rng(2)))
xs_np = rng.standard_normal((4, Bsz, L, D)).astype(np.float32)
ys_t = [teacher(Tensor(a)).realize() for a in xs_np]
opt = Adam(m.params(), lr=0.01)
@TinyJit
def step(xb, yb):
  opt.zero_grad()
  loss = ((m(xb) - yb) ** 2).mean()
  loss.backward()
  Tensor.realize(loss, *opt.schedule_step())
  return loss
ts, losses = [], []
with Context(TRAINING=1):
  for i in range(30):
    st = time.perf_counter(); losses.append(step(Tensor(xs_np[i % 4]), ys_t[i % 4]).item()); ts.append(time.perf_counter() - st)
chk("first step loss", losses[0], ((np_mamba(P, xs_np[0].astype(np.float64))[0] - ys_t[0].numpy()) ** 2).mean(), 1e-5)
chk("loss decreases", np.mean(losses[-4:]) < np.mean(losses[:4]) * 0.7, True, exact=True)
print("losses", [round(v, 4) for v in losses[::6]])
finish()
c = losses[-1] + out_sum
report("ssm", ts[0], ts[1] + ts[2], step, (Tensor(xs_np[0]), ys_t[0]), c)
