# a deep equilibrium model, against numpy: z* = tanh(z* W + x U + b) with W spectrally normalized (W = V / sigma(V), sigma
# by power iteration on u / v buffers updated by assign, torch.nn.utils.spectral_norm's way; the weight-normalized input
# map U = g * Vu / |Vu| by columns), the fixed point by a jitted iteration step on a state updated by assign until the residual
# is small (against numpy's iteration and its residual), the implicit gradient by hand: the adjoint g = dL/dz* + J^T g
# solved by iterating vector-Jacobian products (Tensor.gradient with an explicit gradient), the parameters' gradients as one
# more VJP; checked against numpy's (I - J)^-T solve per sample and against backpropagation through 40 unrolled
# iterations; the Jacobian-free gradient differs; Adam on the implicit gradients (assigned to .grad by hand) with the power
# iteration in the same TinyJit step
import time

import numpy as np
from tinygrad import Tensor, TinyJit
from tinygrad.helpers import Context
from tinygrad.nn.optim import Adam

from bench import chk, finish, report

rng = np.random.default_rng(808)
B, DX, D, SCALE, K = 16, 6, 24, 0.5, 30

class DEQ:
  def __init__(self, r):
    self.V = Tensor((r.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32))
    self.Vu = Tensor(r.standard_normal((DX, D)).astype(np.float32))
    self.g = Tensor(r.uniform(0.5, 1.5, D).astype(np.float32))
    self.b = Tensor((r.standard_normal(D) * 0.1).astype(np.float32))
    self.h = Tensor((r.standard_normal((D, 1)) / np.sqrt(D)).astype(np.float32))
    self.u = Tensor(_unit(r.standard_normal(D)).astype(np.float32)).contiguous().realize()   # power iteration vectors
    self.v = Tensor(_unit(r.standard_normal(D)).astype(np.float32)).contiguous().realize()
  def params(self): return [self.V, self.Vu, self.g, self.b, self.h]
  def power_step(self):                     # new u, v (not assigned)
    v = self.V.T @ self.u; v = v / (v * v).sum().sqrt()
    u = self.V @ v; u = u / (u * u).sum().sqrt()
    return u, v
  def W(self):                              # V / sigma with u, v constants (as torch)
    sigma = (self.u.detach() * (self.V @ self.v.detach())).sum()
    return SCALE * self.V / sigma
  def U(self): return self.g * self.Vu / (self.Vu * self.Vu).sum(0).sqrt()
  def f(self, z, x, W=None, U=None): return (z @ (self.W() if W is None else W) + x @ (self.U() if U is None else U) + self.b).tanh()
def _unit(a): return a / np.linalg.norm(a)

def np_f(P, z, x):
  U = P["g"] * P["Vu"] / np.sqrt((P["Vu"] ** 2).sum(0))
  return np.tanh(z @ P["W"] + x @ U + P["b"])
def np_solve(P, x, tol=1e-12):
  z = np.zeros((x.shape[0], D))
  for i in range(1000):
    zn = np_f(P, z, x)
    if np.abs(zn - z).max() < tol: return zn, i + 1
    z = zn
  return z, 1000
def np_implicit_grads(P, x, y):
  """dL/dV (through W = SCALE V / sigma, u and v fixed), dL/db and dL/dh for L = mean((z* h - y)^2), by (I - J)^-T."""
  z, _ = np_solve(P, x)
  out = z @ P["h"]; gz = 2 * (out - y) @ P["h"].T / out.size
  s = 1 - z ** 2                                         # tanh'
  g = np.stack([np.linalg.solve(np.eye(D) - P["W"] * s[i], gz[i]) for i in range(x.shape[0])])   # J_i^T = W diag(s_i)
  ga = g * s                                             # gradient at the pre-activation
  gW = z.T @ ga
  sig, u, v = P["sigma"], P["u"], P["v"]
  gV = SCALE * (gW / sig - (gW * P["V"]).sum() / sig ** 2 * np.outer(u, v))
  return ((out - y) ** 2).mean(), gV, ga.sum(0), z.T @ (2 * (out - y) / out.size), z

m = DEQ(np.random.default_rng(3))
x_np = rng.standard_normal((B, DX)).astype(np.float32)
y_np = np.sin(x_np[:, :1] * 2) * np.cos(x_np[:, 1:2]) + 0.3 * x_np[:, 2:3]
x, y = Tensor(x_np), Tensor(y_np.astype(np.float32))

# spectral norm: power iteration converges to the top singular value
power = TinyJit(lambda: Tensor.realize(*[t.assign(n) for t, n in zip((m.u, m.v), m.power_step())]))
for _ in range(60): power()
s_np = np.linalg.svd(m.V.numpy().astype(np.float64), compute_uv=False)
chk("sigma by power iteration == top singular value", (m.u * (m.V @ m.v)).sum(), s_np[0], 1e-5)
chk("spectral norm of W == SCALE", np.linalg.svd(m.W().numpy().astype(np.float64), compute_uv=False)[0], SCALE, 1e-5)
chk("weight norm: column norms of U == g", (m.U() ** 2).sum(0).sqrt(), m.g.numpy(), 1e-5)
P = {k: getattr(m, k).numpy().astype(np.float64) for k in ("V", "Vu", "g", "b", "h", "u", "v")}
P["sigma"] = float(P["u"] @ P["V"] @ P["v"]); P["W"] = SCALE * P["V"] / P["sigma"]

# the forward fixed point: a jitted iteration step on a state updated by assign
z = Tensor.zeros(B, D).contiguous().realize()
@TinyJit
def iterate(xb):
  zn = m.f(z, xb)
  res = (zn - z).abs().max()
  Tensor.realize(res, z.assign(zn))
  return res
res_hist = [iterate(x).item() for _ in range(3)]
while res_hist[-1] > 1e-6 and len(res_hist) < 200: res_hist.append(iterate(x).item())
z_ref, n_ref = np_solve(P, x_np.astype(np.float64))
chk("fixed point", z, z_ref, 1e-5)
chk("residual |f(z*) - z*|", (m.f(z, x) - z).abs().max(), 0.0, 2e-6)
zn_, n_np = np.zeros((B, D)), 0
while True:
  zn_, zo_ = np_f(P, zn_, x_np.astype(np.float64)), zn_; n_np += 1
  if np.abs(zn_ - zo_).max() <= 1e-6: break
chk("iterations to a residual of 1e-6 (numpy's +- 1)", abs(len(res_hist) - n_np) <= 1, True, exact=True)
print("forward iterations", len(res_hist), "residuals", [f"{r:.1e}" for r in res_hist[::8]])

# the implicit gradient by hand: adjoint fixed point by VJPs, then one VJP for the parameters
def implicit(xb, yb, k=K):
  zs = Tensor.zeros(xb.shape[0], D)
  W, U = m.W(), m.U()
  for _ in range(k): zs = m.f(zs, xb, W.detach(), U.detach())
  zs = zs.detach()
  fz = m.f(zs, xb)                                          # one step attached to the parameters
  loss = ((fz @ m.h - yb) ** 2).mean()
  gL = loss.gradient(fz)[0]
  g = gL
  for _ in range(k): g = fz.gradient(zs, gradient=g)[0] + gL
  return loss, fz.gradient(*m.params()[:4], gradient=g) + loss.gradient(m.h), gL
loss, grads, gL = implicit(x, y, 40)
ref_loss, gV, gb, gh, _ = np_implicit_grads(P, x_np.astype(np.float64), y_np)
chk("loss at the fixed point", loss, ref_loss, 1e-5)
chk("implicit dL/dV vs (I - J)^-T", grads[0], gV, 1e-5)
chk("implicit dL/db", grads[3], gb, 1e-5)
chk("dL/dh", grads[4], gh, 1e-5)
# backpropagation through 40 unrolled iterations gives the same gradients
zu = Tensor.zeros(B, D)
for _ in range(40): zu = m.f(zu, x)
lu = ((zu @ m.h - y) ** 2).mean()
gu = lu.gradient(*m.params()[:4]); Tensor.realize(*gu)
for name, a, b2 in zip(["V", "Vu", "g", "b"], gu, grads[:4]): chk(f"unrolled dL/d{name} == implicit", a, b2.numpy(), 2e-5)
# the Jacobian-free gradient (the adjoint replaced by dL/dz*) is not the same
jf = m.f(Tensor(z.numpy()), x).gradient(m.b, gradient=gL)[0]
chk("Jacobian-free dL/db differs", np.abs(jf.numpy() - gb).max() > 1e-3, True, exact=True)

# training: Adam on the implicit gradients, the power iteration in the same jitted step
opt = Adam(m.params(), lr=1e-2)
xs = [rng.standard_normal((B, DX)).astype(np.float32) for _ in range(4)]
ys = [(np.sin(a[:, :1] * 2) * np.cos(a[:, 1:2]) + 0.3 * a[:, 2:3]).astype(np.float32) for a in xs]
@TinyJit
def step(xb, yb):
  u, v = m.power_step()
  loss, grads, _ = implicit(xb, yb)
  for p, gr in zip(m.params(), grads): p.grad = gr
  Tensor.realize(loss, *opt.schedule_step(), m.u.assign(u.detach()), m.v.assign(v.detach()))
  return loss
ts, losses = [], []
with Context(TRAINING=1):
  for i in range(40):
    if i == 0:
      P = {k: getattr(m, k).numpy().astype(np.float64) for k in ("V", "Vu", "g", "b", "h", "u", "v")}
      P["sigma"] = float(P["u"] @ P["V"] @ P["v"]); P["W"] = SCALE * P["V"] / P["sigma"]
      ref0 = np_implicit_grads(P, xs[0].astype(np.float64), ys[0])
      b0 = P["b"]
    st = time.perf_counter(); losses.append(step(Tensor(xs[i % 4]), Tensor(ys[i % 4])).item()); ts.append(time.perf_counter() - st)
    if i == 0: chk("first step: Adam's first update of b is -lr * sign(grad)", m.b, b0 - 1e-2 * np.sign(ref0[2]), 1e-5)
chk("first step loss", losses[0], ref0[0], 1e-5)
chk("loss decreases", np.mean(losses[-4:]) < np.mean(losses[:4]) * 0.7, True, exact=True)
chk("the trained map stays a contraction: |W|_2 <= SCALE", np.linalg.svd(m.W().numpy().astype(np.float64), compute_uv=False)[0] <= SCALE * 1.001, True, exact=True)
print("losses", [round(v, 4) for v in losses[::8]])
finish()
c = losses[-1] + float(np.abs(z.numpy()).sum()) + float(np.abs(grads[0].numpy()).sum())
report("deq", ts[0], ts[1] + ts[2], step, (Tensor(xs[0]), Tensor(ys[0])), c)
