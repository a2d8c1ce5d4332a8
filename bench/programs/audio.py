# an audio pipeline: a waveform framed by reshapes of two half-frame views (hop = window / 2) and by unfold, a Hann window,
# a real DFT as matmuls with cos/sin tables, a power spectrum, a triangular mel filterbank built from arange, log, per-channel
# normalization; a conv1d stack with dilations (1, 2, 4) and padding that keeps the length, log_softmax over classes and a
# CTC forward (alpha recursion in log space over time: pad-shifts and logsumexp) as the loss, trained with Adam under TinyJit
import math
import time

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes, nn
from tinygrad.helpers import Context

from bench import data, init, report

B, N, W, NMEL, CH, V, S = 2, 2048, 128, 12, 32, 6, 5
HOP = W // 2
T = N // HOP - 1

def frames_by_halves(x):
  # frame t = halves t and t+1: no gather, two shifted views of the signal cut into half frames
  h = x.reshape(B, N // HOP, HOP)
  return h[:, :-1].cat(h[:, 1:], dim=2)                     # B, T, W
def hann(w): return 0.5 - 0.5 * (2 * math.pi * Tensor.arange(w) / w).cos()
def dft_tables(w):
  k = Tensor.arange(w // 2 + 1).reshape(1, -1).float(); n = Tensor.arange(w).reshape(-1, 1).float()
  ang = 2 * math.pi * n * k / w
  return ang.cos(), -ang.sin()                               # W, F
def mel_filters(nfft_bins, nmel, sr=16000.0):
  mel = lambda f: 2595 * np.log10(1 + f / 700)
  pts = 700 * (10 ** (np.linspace(mel(0), mel(sr / 2), nmel + 2) / 2595) - 1)   # band edges in Hz (numpy: exact float64)
  edges = Tensor((pts / (sr / 2) * (nfft_bins - 1)).astype(np.float32))
  f = Tensor.arange(nfft_bins).float().reshape(1, -1)
  lo, mid, hi = edges[:-2].reshape(-1, 1), edges[1:-1].reshape(-1, 1), edges[2:].reshape(-1, 1)
  up, down = (f - lo) / (mid - lo), (hi - f) / (hi - mid)
  return up.minimum(down).clip(0, None)                      # NMEL, F

cos_t, sin_t = [t.contiguous().realize() for t in dft_tables(W)]
melfb = mel_filters(W // 2 + 1, NMEL).contiguous().realize()
win = hann(W).contiguous().realize()
def features(wave):
  fr = frames_by_halves(wave) * win
  re, im = fr @ cos_t, fr @ sin_t
  power = re.square() + im.square()                          # B, T, F
  logmel = (power @ melfb.T + 1e-6).log()                    # B, T, NMEL
  return (logmel - logmel.mean(1, keepdim=True)) / (logmel.std(1, keepdim=True) + 1e-2)

class Net:
  def __init__(self):
    self.convs = [nn.Conv1d(NMEL if i == 0 else CH, CH, 3, padding=d, dilation=d) for i, d in enumerate((1, 2, 4))]
    self.out = nn.Conv1d(CH, V, 1)
  def __call__(self, f):
    x = f.transpose(1, 2)                                    # B, NMEL, T
    for i, c in enumerate(self.convs): x = c(x).gelu() + (x if i else 0)
    return self.out(x).transpose(1, 2).log_softmax(-1)       # B, T, V
def ctc_loss(logp, labels):
  # labels: B, S (no blanks, blank = 0); extended: blank l1 blank l2 ... blank, length 2S+1
  L = 2 * S + 1
  ext = Tensor.zeros(B, L, dtype=dtypes.int32).contiguous()
  ext[:, 1::2] = labels
  lp = logp.gather(2, ext.unsqueeze(1).expand(B, T, L))       # B, T, L: log p of each extended label at each time
  prev2_ok = ext[:, 2:] != ext[:, :-2]                       # skip a blank only between different labels
  skip = Tensor.cat(Tensor.zeros(B, 2, dtype=dtypes.bool), prev2_ok & (ext[:, 2:] != 0), dim=1)
  ninf = -1e30
  alpha = Tensor.cat(lp[:, 0, :2], Tensor.full((B, L - 2), ninf), dim=1)
  for t in range(1, T):
    a1 = alpha.pad(((0, 0), (1, 0)), value=ninf)[:, :L]
    a2 = skip.where(alpha.pad(((0, 0), (2, 0)), value=ninf)[:, :L], ninf)
    alpha = Tensor.stack(alpha, a1, a2, dim=-1).logsumexp(-1) + lp[:, t]
  return -alpha[:, -2:].logsumexp(-1).mean()

wave_np = np.sin(np.linspace(0, 200, N, dtype=np.float32))[None] * np.array([[1.0], [0.5]], np.float32)
wave = (Tensor(wave_np) + data(1, B, N) * 0.1).realize()
f = features(wave)
# checks against numpy: the frames (also by unfold), the DFT (numpy.fft.rfft), the feature shape
wn = wave.numpy(); fr_np = np.stack([wn[:, t * HOP:t * HOP + W] for t in range(T)], 1)
print("frames", np.abs(frames_by_halves(wave).numpy() - fr_np).max(), "unfold", np.abs(wave.unfold(1, W, HOP).numpy() - fr_np).max())
spec_np = np.fft.rfft(fr_np * win.numpy(), axis=-1)
fw = frames_by_halves(wave) * win
print("dft rel err", float(np.abs((fw @ cos_t).numpy() - spec_np.real).max() / np.abs(spec_np).max()),
      float(np.abs((fw @ sin_t).numpy() - spec_np.imag).max() / np.abs(spec_np).max()))
pw = np.abs(spec_np) ** 2; lm = np.log(pw @ melfb.numpy().T.astype(np.float64) + 1e-6)
f_np = (lm - lm.mean(1, keepdims=True)) / (lm.std(1, ddof=1, keepdims=True) + 1e-2)
print("features vs numpy", float(np.abs(f.numpy() - f_np).max()))
print("features", f.shape, f.dtype, round(f.abs().sum().item(), 4), round(f.abs().mean().item(), 4), "mel rows", [round(v, 3) for v in melfb.sum(1).tolist()[:4]])

net = Net(); init(net)
opt = nn.optim.Adam(nn.state.get_parameters(net), lr=3e-3)
labels = (data(2, B, S, kind="int", hi=V - 1) + 1).realize()
@TinyJit
def step(wave, labels):
  opt.zero_grad()
  loss = ctc_loss(net(features(wave)), labels).backward()
  opt.step()
  return loss.realize()
losses, ts = [], []
with Context(TRAINING=1):
  for _ in range(6):
    st = time.perf_counter(); losses.append(step(wave, labels).item()); ts.append(time.perf_counter() - st)
print("ctc losses", [round(v, 4) for v in losses])
# the CTC forward in numpy (float64) on the trained net's log-probabilities
lp = net(features(wave)).numpy().astype(np.float64)
def np_ctc(lp, lab):
  ext = [0]; [ext.extend([int(c), 0]) for c in lab]
  L = len(ext); a = np.full(L, -np.inf); a[0], a[1] = lp[0, ext[0]], lp[0, ext[1]]
  for t in range(1, T):
    n = np.full(L, -np.inf)
    for s in range(L):
      terms = [a[s]] + ([a[s - 1]] if s >= 1 else []) + ([a[s - 2]] if s >= 2 and ext[s] != 0 and ext[s] != ext[s - 2] else [])
      n[s] = np.logaddexp.reduce(terms) + lp[t, ext[s]]
    a = n
  return -np.logaddexp(a[-1], a[-2])
ref = np.mean([np_ctc(lp[b], labels.numpy()[b]) for b in range(B)])
print("ctc vs numpy", round(float(ctc_loss(Tensor(lp.astype(np.float32)), labels).item()), 3), round(float(ref), 3))
report("audio", ts[0], ts[1] + ts[2], step, (wave, labels), sum(losses) + f.abs().sum().item())
