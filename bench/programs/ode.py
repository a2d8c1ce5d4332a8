# ODE and physics simulation loops under TinyJit, state updated by assign, each against numpy: RK4 for a batch of
# damped oscillators (against the closed form), RK4 for a batch of Lorenz systems (against the same RK4 in numpy, short
# horizon), an N-body system by velocity Verlet (pairwise forces by broadcasting, the self-pair masked with eye; energy and
# momentum conserved, positions against numpy), a mass-spring chain with fixed ends by pad / shrink stencils; several
# substeps unrolled in each jitted call
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes

from bench import chk, finish, peer, report


def rk4(f, y, dt):
  k1 = f(y); k2 = f(y + dt / 2 * k1); k3 = f(y + dt / 2 * k2); k4 = f(y + dt * k3)
  return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

# damped oscillators x'' + 2 z w x' + w^2 x = 0, state (B, 2), w and z per row
B = 16
rng = np.random.default_rng(5)
w_np, z_np = rng.uniform(1, 3, B).astype(np.float32), rng.uniform(0.05, 0.5, B).astype(np.float32)
w_t, z_t = Tensor(w_np).reshape(B, 1), Tensor(z_np).reshape(B, 1)
def osc(y):
  x, v = y[:, :1], y[:, 1:]
  return Tensor.cat(v, -2 * z_t * w_t * v - w_t * w_t * x, dim=1)
osc_state = Tensor.cat(Tensor.ones(B, 1), Tensor.zeros(B, 1), dim=1).contiguous().realize()
DT, SUB = 0.01, 10
@TinyJit
def osc_step():
  y = osc_state
  for _ in range(SUB): y = rk4(osc, y, DT)
  osc_state.assign(y)
  return osc_state.realize()
ts_osc = []
for _ in range(30):
  st = time.perf_counter(); osc_step(); ts_osc.append(time.perf_counter() - st)
T = 30 * SUB * DT
wd = w_np * np.sqrt(1 - z_np ** 2)
x_ref = np.exp(-z_np * w_np * T) * (np.cos(wd * T) + z_np * w_np / wd * np.sin(wd * T))
chk("oscillator x(T) vs closed form", osc_state[:, 0], x_ref, 1e-5)

# Lorenz, sigma 10, rho 28, beta 8/3: a batch of starting points, RK4 against numpy's RK4 in float32
L0 = (rng.standard_normal((8, 3)) * 5 + np.array([0, 0, 20])).astype(np.float32)
def lorenz(y):
  x, yy, z = y[:, 0:1], y[:, 1:2], y[:, 2:3]
  return Tensor.cat(10 * (yy - x), x * (28 - z) - yy, x * yy - 8 / 3 * z, dim=1)
def lorenz_np(y):
  x, yy, z = y[:, 0:1], y[:, 1:2], y[:, 2:3]
  return np.concatenate([10 * (yy - x), x * (28 - z) - yy, x * yy - np.float32(8 / 3) * z], 1)
def rk4_np(f, y, dt):
  k1 = f(y); k2 = f(y + dt / 2 * k1); k3 = f(y + dt / 2 * k2); k4 = f(y + dt * k3)
  return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
lor_state = Tensor(L0).contiguous().realize()
@TinyJit
def lor_step():
  y = lor_state
  for _ in range(5): y = rk4(lorenz, y, 0.002)
  lor_state.assign(y)
  return lor_state.realize()
for _ in range(20): lor_step()
yn = L0.astype(np.float64)
for _ in range(100): yn = rk4_np(lorenz_np, yn, 0.002)
chk("lorenz after 100 RK4 steps", lor_state, yn, 2e-4)

# N-body by velocity Verlet (G = 1, softening eps)
NB, EPS = 12, 0.1
pos0 = rng.standard_normal((NB, 3)).astype(np.float32); vel0 = (rng.standard_normal((NB, 3)) * 0.3).astype(np.float32)
mass_np = rng.uniform(0.5, 1.5, NB).astype(np.float32)
vel0 -= (mass_np[:, None] * vel0).sum(0) / mass_np.sum()                   # zero total momentum
mass = Tensor(mass_np).realize()
eye = Tensor.eye(NB).realize()
def accel(p):
  d = p.unsqueeze(0) - p.unsqueeze(1)                                       # d[i, j] = p[j] - p[i]
  r2 = (d * d).sum(-1) + EPS * EPS
  inv = (r2 ** -1.5) * (1 - eye)                                            # no self force
  return (d * (inv * mass.unsqueeze(0)).unsqueeze(-1)).sum(1)
def energy(p, v):
  d = p.unsqueeze(0) - p.unsqueeze(1)
  r = ((d * d).sum(-1) + EPS * EPS).sqrt()
  pot = -(mass.unsqueeze(0) * mass.unsqueeze(1) / r * (1 - eye)).sum() / 2
  return (0.5 * mass * (v * v).sum(-1)).sum() + pot
pos, vel = Tensor(pos0).contiguous().realize(), Tensor(vel0).contiguous().realize()
acc = accel(pos).contiguous().realize()
H = 0.002
@TinyJit
def nbody_step():
  p, v, a = pos, vel, acc
  for _ in range(4):
    p = p + v * H + a * (H * H / 2)
    a_new = accel(p)
    v = v + (a + a_new) * (H / 2)
    a = a_new
  pos.assign(p); vel.assign(v); acc.assign(a)
  e = energy(pos, vel)
  return Tensor.realize(e, pos, vel, acc)
def accel_np(p):
  d = p[None] - p[:, None]; r2 = (d * d).sum(-1) + EPS * EPS
  inv = r2 ** -1.5 * (1 - np.eye(NB)); return (d * (inv * mass_np[None])[..., None]).sum(1)
e0 = energy(pos, vel).item()
ts, es = [], []
for _ in range(40):
  st = time.perf_counter(); es.append(nbody_step().item()); ts.append(time.perf_counter() - st)
pn, vn = pos0.astype(np.float64), vel0.astype(np.float64); an = accel_np(pn)
for _ in range(160):
  pn = pn + vn * H + an * H * H / 2; a2 = accel_np(pn); vn = vn + (an + a2) * H / 2; an = a2
chk("n-body positions", pos, pn, 1e-4); chk("n-body velocities", vel, vn, 1e-4)
def energy_np(p, v):
  d = p[None] - p[:, None]; r = np.sqrt((d * d).sum(-1) + EPS * EPS)
  return (0.5 * mass_np * (v * v).sum(-1)).sum() - (mass_np[None] * mass_np[:, None] / r * (1 - np.eye(NB))).sum() / 2
chk("energy vs numpy", es[-1], energy_np(pn, vn), 1e-4)
chk("energy nearly conserved", abs(es[-1] - e0) / abs(e0) < 5e-3, True, exact=True)
chk("momentum conserved", (vel * mass.unsqueeze(1)).sum(0), np.zeros(3), 1e-5)

# a mass-spring chain with fixed ends: the Laplacian by pad + shrink, RK4 on (u, u') with the two halves stacked
NC = 32
u0 = np.sin(np.linspace(0, np.pi, NC + 2)[1:-1] * 3).astype(np.float32)
def chain(y):
  u, v = y[0], y[1]
  up = u.pad(((1, 1),))                                                     # fixed ends: 0
  lap = up[2:] + up[:-2] - 2 * u
  return Tensor.stack(v, lap * 50.0)
ch_state = Tensor.stack(Tensor(u0), Tensor.zeros(NC)).contiguous().realize()
PEER = peer()
if PEER: print("tinygrad 0.14: each RK4 step of the chain realized (unrealized, its schedule grows 4x a step: 1 / 2 / 3 steps 0.4 / 1.25 / 5.0 s, 8 past 4 minutes)")
@TinyJit
def chain_step():
  y = ch_state
  for _ in range(8):
    y = rk4(chain, y, 0.01)
    if PEER: y = y.realize()
  ch_state.assign(y)
  return ch_state.realize()
for _ in range(10): chain_step()
def chain_np(y):
  up = np.pad(y[0], 1); return np.stack([y[1], (up[2:] + up[:-2] - 2 * y[0]) * 50.0])
yc = np.stack([u0, np.zeros(NC)]).astype(np.float64)
for _ in range(80): yc = rk4_np(chain_np, yc, 0.01)
chk("spring chain", ch_state, yc, 1e-4)
# a normal mode of the chain: amplitude follows cos(omega t)
om = np.sqrt(50.0) * 2 * np.sin(3 * np.pi / (2 * (NC + 1)))
chk("chain normal mode", ch_state[0], u0 * np.cos(om * 0.8), 1e-4)
print("energy drift", abs(es[-1] - e0) / abs(e0), "lorenz z", [round(v, 3) for v in lor_state[:, 2].tolist()[:3]], "dtype", lor_state.dtype == dtypes.float32)
finish()
c = float(osc_state.sum().item()) + float(lor_state.sum().item()) / 100 + es[-1] + float(ch_state.abs().sum().item())
report("ode", ts[0], ts[1] + ts[2], nbody_step, (), c, chk=lambda r: r.item())
