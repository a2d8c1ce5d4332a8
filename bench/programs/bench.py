import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes
from tinygrad.helpers import Context
from tinygrad.nn.state import get_state_dict


def init(m, seed=0):
  # deterministic numpy weights so both packages start from identical parameters
  rng = np.random.default_rng(seed)
  for k, v in sorted(get_state_dict(m).items()):
    if not dtypes.is_float(v.dtype): continue
    shp = tuple(v.shape)
    if k.endswith("running_var"): a = np.ones(shp)
    elif k.endswith("running_mean"): a = np.zeros(shp)
    elif len(shp) == 1: a = np.ones(shp) if k.endswith("weight") else rng.uniform(-0.1, 0.1, shp)
    else:
      fan = int(np.prod(shp[1:])) if "embed" not in k and "tok" not in k else 1
      a = rng.uniform(-1, 1, shp) / np.sqrt(fan)
    v.assign(Tensor(a.astype(np.float32)).cast(v.dtype)).realize()
def data(seed, *shape, kind="randn", hi=None):
  rng = np.random.default_rng(seed)
  if kind == "int": return Tensor(rng.integers(0, hi, shape).astype(np.int32)).realize()
  if kind == "rand": return Tensor(rng.random(shape).astype(np.float32)).realize()
  return Tensor(rng.standard_normal(shape).astype(np.float32)).realize()
def bench(name, step, args, n=10, train=True, chk=lambda r: r.item()):
  with Context(TRAINING=int(train)):
    st = time.perf_counter(); c = chk(step(*args)); t1 = time.perf_counter() - st
    st = time.perf_counter(); chk(step(*args)); chk(step(*args)); t2 = time.perf_counter() - st
    st = time.perf_counter()
    for _ in range(n): r = step(*args)
    chk(r); t3 = (time.perf_counter() - st) / n
  print(f"{name} first {t1:.2f}s capture {t2:.2f}s step {t3*1e3:.2f}ms chk {c:.4f}")


def classifier_step(model, opt):
  """The jitted training step most of these programs use: cross-entropy on integer labels, backward, optimizer step."""
  @TinyJit
  def step(x, y):
    opt.zero_grad()
    loss = model(x).sparse_categorical_crossentropy(y).backward()
    opt.step()
    return loss.realize()
  return step
def report(name, t1, t2, step, args, c, n=10, train=True, chk=lambda r: r.item()):
  """For programs that time their first call and capture themselves (the first step inside a loop): times n more steps."""
  with Context(TRAINING=int(train)):
    for _ in range(2): chk(step(*args))  # a step function not yet captured (or a fresh one) captures here
    st = time.perf_counter()
    for _ in range(n): r = step(*args)
    chk(r); t3 = (time.perf_counter() - st) / n
  print(f"{name} first {t1:.2f}s capture {t2:.2f}s step {t3*1e3:.2f}ms chk {c:.4f}")


# value checks against numpy for the programs from round 4 on: chk() records each mismatch, finish() prints and asserts
bad: list = []
def chk(name, t, ref, tol=1e-5, exact=False):
  ref = np.asarray(ref)
  got = t.numpy() if isinstance(t, Tensor) else np.asarray(t)
  ok = got.shape == ref.shape and (np.array_equal(got, ref) if exact else np.allclose(got, ref, atol=tol, rtol=tol, equal_nan=True))
  if not ok: bad.append(name); print(f"MISMATCH {name}: got {got.ravel()[:6]} {got.dtype} {got.shape}, numpy {ref.ravel()[:6]} {ref.dtype} {ref.shape}")
  return got
def finish(nchecks_note=""):
  print(f"mismatches {bad} {nchecks_note}".rstrip())
  assert not bad, bad
def peer():
  """True under tinygrad 0.14 (the installed wheel), False in this package (the workspace's packages/core)."""
  import tinygrad
  return "site-packages" in (tinygrad.__file__ or "")
