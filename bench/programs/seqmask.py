# recurrent models over a padded batch of variable lengths, against a numpy forward: nn.LSTMCell unrolled with a length
# mask (the state frozen past each sequence's end), the last valid output gathered by index, a GRU by hand run both ways
# (the backward direction reverses each sequence within its own length by a gather), masked mean / max pooling, a
# classifier trained with Adam under TinyJit on the masked losses; padding is checked not to leak (changing the padded
# inputs changes nothing); greedy decoding of a stopping sequence with an end token (finished rows frozen)
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes, nn
from tinygrad.helpers import Context
from tinygrad.nn.state import get_parameters, get_state_dict

from bench import chk, finish, init, report

rng = np.random.default_rng(66)
B, T, I, H, C = 5, 7, 4, 6, 3
lens_np = np.array([7, 3, 5, 1, 6]); mask_np = (np.arange(T)[None] < lens_np[:, None]).astype(np.float32)   # (B, T)
x_np = (rng.standard_normal((B, T, I)) * mask_np[..., None]).astype(np.float32)
y_np = rng.integers(0, C, B).astype(np.int32)

class Model:
  def __init__(self):
    self.lstm = nn.LSTMCell(I, H)
    self.gf_w, self.gf_u, self.gf_b = Tensor.zeros(3 * H, I), Tensor.zeros(3 * H, H), Tensor.zeros(3 * H)
    self.gb_w, self.gb_u, self.gb_b = Tensor.zeros(3 * H, I), Tensor.zeros(3 * H, H), Tensor.zeros(3 * H)
    self.head = nn.Linear(4 * H, C)
  def gru(self, x, mask, w, u, b):
    h, outs = Tensor.zeros(x.shape[0], H), []
    for t in range(x.shape[1]):
      gx, gh = x[:, t] @ w[:2 * H].T + b[:2 * H], h @ u[:2 * H].T
      r, z = (gx + gh).chunk(2, dim=1); r, z = r.sigmoid(), z.sigmoid()
      n = (x[:, t] @ w[2 * H:].T + b[2 * H:] + r * (h @ u[2 * H:].T)).tanh()
      m = mask[:, t].unsqueeze(1)
      h = m * ((1 - z) * n + z * h) + (1 - m) * h
      outs.append(h)
    return Tensor.stack(*outs, dim=1), h
  def __call__(self, x, mask, lens):
    h = c = Tensor.zeros(x.shape[0], H)
    outs = []
    for t in range(x.shape[1]):
      hn, cn = self.lstm(x[:, t], (h, c))
      m = mask[:, t].unsqueeze(1)
      h, c = (m > 0).where(hn, h), (m > 0).where(cn, c)
      outs.append(hn * m)
    seq = Tensor.stack(*outs, dim=1)                                            # (B, T, H), zeros past the end
    last = seq.gather(1, (lens - 1).reshape(-1, 1, 1).expand(-1, 1, H)).squeeze(1)
    # reverse each sequence within its length: position t reads t' = len - 1 - t (t < len)
    ridx = (lens.unsqueeze(1) - 1 - Tensor.arange(x.shape[1]).unsqueeze(0)).clip(0, x.shape[1] - 1)
    xr = x.gather(1, ridx.unsqueeze(2).expand(-1, -1, x.shape[2])) * mask.unsqueeze(2)
    _, hf = self.gru(x, mask, self.gf_w, self.gf_u, self.gf_b)
    _, hb = self.gru(xr, mask, self.gb_w, self.gb_u, self.gb_b)
    mm = mask.unsqueeze(2)
    mean = (seq * mm).sum(1) / mm.sum(1)
    mx = mm.bool().where(seq, -float("inf")).max(1)
    feat = (h - last).abs().sum() * 0 + last.cat(hf + hb, mean, mx, dim=1)
    return self.head(feat), (h, last, hf, hb, mean, mx)

def np_forward(p, x, mask, lens):
  sg = lambda v: 1 / (1 + np.exp(-v))
  h = c = np.zeros((x.shape[0], H)); outs = []
  for t in range(T):
    g = x[:, t] @ p["lstm.weight_ih"].T + p["lstm.bias_ih"] + h @ p["lstm.weight_hh"].T + p["lstm.bias_hh"]
    i, f, gg, o = np.split(g, 4, 1)
    cn = sg(f) * c + sg(i) * np.tanh(gg); hn = sg(o) * np.tanh(cn)
    m = mask[:, t:t + 1]; h, c = np.where(m > 0, hn, h), np.where(m > 0, cn, c); outs.append(hn * m)
  seq = np.stack(outs, 1); last = seq[np.arange(len(lens)), lens - 1]
  def gru(xx, w, u, b):
    hh = np.zeros((xx.shape[0], H))
    for t in range(T):
      r, z = np.split(sg(xx[:, t] @ w[:2 * H].T + b[:2 * H] + hh @ u[:2 * H].T), 2, 1)
      n = np.tanh(xx[:, t] @ w[2 * H:].T + b[2 * H:] + r * (hh @ u[2 * H:].T))
      m = mask[:, t:t + 1]; hh = m * ((1 - z) * n + z * hh) + (1 - m) * hh
    return hh
  xr = np.stack([np.concatenate([x[b, :lens[b]][::-1], np.zeros((T - lens[b], I))]) for b in range(len(lens))])
  hf, hb = gru(x, p["gf_w"], p["gf_u"], p["gf_b"]), gru(xr, p["gb_w"], p["gb_u"], p["gb_b"])
  mean = (seq * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
  mx = np.where(mask[..., None] > 0, seq, -np.inf).max(1)
  feat = np.concatenate([last, hf + hb, mean, mx], 1)
  return feat @ p["head.weight"].T + p["head.bias"], (h, last, hf, hb, mean, mx)

model = Model(); init(model, seed=3)
P = {k: v.numpy().astype(np.float64) for k, v in get_state_dict(model).items()}
X, M, L = Tensor(x_np), Tensor(mask_np), Tensor(lens_np.astype(np.int32))
logits, parts = model(X, M, L)
ref_logits, ref_parts = np_forward(P, x_np.astype(np.float64), mask_np, lens_np)
chk("logits", logits, ref_logits, 1e-5)
for name, a, r in zip(["final h", "last output", "gru forward", "gru backward", "masked mean", "masked max"], parts, ref_parts): chk(name, a, r, 1e-5)
chk("final h == last valid output", parts[0], parts[1].numpy(), 1e-6)
noise = (rng.standard_normal((B, T, I)) * 100 * (1 - mask_np)[..., None]).astype(np.float32)
chk("padding does not leak", model(Tensor(x_np + noise), M, L)[0], logits.numpy(), 1e-5)

opt = nn.optim.Adam(get_parameters(model), lr=0.02)
@TinyJit
def step(x, mask, lens, y):
  opt.zero_grad()
  out, _ = model(x, mask, lens)
  loss = out.sparse_categorical_crossentropy(y).backward()
  Tensor.realize(loss, *opt.schedule_step())   # the loss of the weights before the step
  return loss
ts, losses = [], []
with Context(TRAINING=1):
  for _ in range(12):
    st = time.perf_counter(); losses.append(step(X, M, L, Tensor(y_np)).item()); ts.append(time.perf_counter() - st)
ref0 = ref_logits - ref_logits.max(1, keepdims=True); ref0 = -(ref0[np.arange(B), y_np] - np.log(np.exp(ref0).sum(1))).mean()
chk("first loss", losses[0], ref0, 1e-5)
chk("loss decreases", losses[-1] < losses[0] * 0.5, True, exact=True)
print("losses", [round(v, 4) for v in losses[::3]])

# greedy decoding with an end token: a toy next-token table; rows stop at EOS and stay there
V, EOS = 6, 0
table_np = rng.standard_normal((V, V)).astype(np.float32); table_np[:, EOS] += np.array([0, -1, 3, -2, 0.5, -0.5])
tok = Tensor(np.array([1, 2, 3, 4, 5], np.int32)); done = Tensor.zeros(5, dtype=dtypes.bool); seq_out = []
tokn, donen = np.array([1, 2, 3, 4, 5]), np.zeros(5, bool); ref_out = []
for _ in range(6):
  nxt = Tensor(table_np)[tok].argmax(1).cast(dtypes.int32)
  tok = done.where(EOS, nxt); done = done | (tok == EOS); seq_out.append(tok)
  nn_ = table_np[tokn].argmax(1); tokn = np.where(donen, EOS, nn_); donen = donen | (tokn == EOS); ref_out.append(tokn)
chk("greedy decoding with EOS", Tensor.stack(*seq_out, dim=1), np.stack(ref_out, 1), exact=True)
finish()
c = losses[-1] + float(logits.abs().sum().item()) + float(Tensor.stack(*seq_out).sum().item())
report("seqmask", ts[0], ts[1] + ts[2], step, (X, M, L, Tensor(y_np)), c)
