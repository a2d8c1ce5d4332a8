from tinygrad import Tensor, TinyJit, nn
from tinygrad.nn.state import get_parameters

from bench import bench, data, init


class Policy:
  def __init__(self): self.l1, self.l2, self.l3 = nn.Linear(16, 64), nn.Linear(64, 64), nn.Linear(64, 4)
  def __call__(self, x): return self.l3(self.l2(self.l1(x).tanh()).tanh())
m = Policy(); init(m)
opt = nn.optim.Adam(get_parameters(m), lr=1e-2)
@TinyJit
def act(obs):
  logits = m(obs)
  return logits.softmax().multinomial().realize(), logits.argmax(-1).realize()
@TinyJit
def step(obs, acts, rets):
  opt.zero_grad()
  logp = m(obs).log_softmax()
  lp = logp.gather(1, acts.reshape(-1, 1)).reshape(-1)
  adv = (rets - rets.mean()) / (rets.std() + 1e-8)
  ent = -(logp.exp() * logp).sum(-1).mean()
  loss = (-(lp * adv).mean() - 0.01 * ent).backward()
  opt.step()
  return loss.realize()
def episode(obs, rews):
  a, g = act(obs)
  # discounted returns of random rewards (computed in tensor land)
  rets = (rews * (0.99 ** Tensor.arange(rews.shape[0]).float())).flip(0).cumsum(0).flip(0)
  return step(obs, a.reshape(-1), rets), g
obs = data(1, 64, 16); rews = data(2, 64)
bench("reinforce", episode, (obs, rews), chk=lambda r: r[1].sum().item() + 0 * r[0].item())
