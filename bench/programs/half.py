from tinygrad import TinyJit, dtypes, nn
from tinygrad.nn.state import get_state_dict

from bench import bench, data, init


class Net:
  def __init__(self):
    self.c1, self.c2 = nn.Conv2d(3, 32, 3, padding=1), nn.Conv2d(32, 64, 3, stride=2, padding=1)
    self.ln = nn.LayerNorm(64)
    self.q, self.k, self.v = nn.Linear(64, 64), nn.Linear(64, 64), nn.Linear(64, 64)
    self.fc1, self.fc2 = nn.Linear(64, 256), nn.Linear(256, 10)
  def __call__(self, x):
    x = self.c2(self.c1(x).relu()).relu()                     # B,64,16,16
    x = self.ln(x.flatten(2).transpose(1, 2))                 # B,256,64 tokens
    a = self.q(x).scaled_dot_product_attention(self.k(x), self.v(x))
    x = x + a
    return self.fc2(self.fc1(x).gelu()).mean(1).softmax(-1)
m = Net(); init(m)
for v in get_state_dict(m).values(): v.replace(v.cast(dtypes.half).realize())
@TinyJit
def infer(x): return m(x.cast(dtypes.half)).float().realize()
bench("half", infer, (data(1, 8, 3, 32, 32),), train=False, chk=lambda r: r.numpy()[:, :3].sum() * 1000)
