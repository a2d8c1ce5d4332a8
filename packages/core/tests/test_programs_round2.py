"""Regressions found by the second program survey (bench/programs: attention.py, optims.py and the others of round 2)."""
import numpy as np
import pytest
from conftest import is_null_device
from tinygrad import Device, Tensor, TinyJit, dtypes, nn
from tinygrad.frontend.multi import tensor_buffers
from tinygrad.helpers import Context

pytestmark = pytest.mark.skipif(is_null_device(), reason="NULL runs no kernels: nothing to read back")


def test_jit_output_fed_back_as_input():
  # attention.py's beam search: `scores, ... = beam_step(toks, scores)`. The input of a replay is the buffer the captured
  # kernels write the output into; one kernel overwrote it before another read it (the sum below came out as 44, not 36).
  # Expected values: numpy (tinygrad 0.14 prints the same: it replays on a copy of an input its kernels write)
  @TinyJit
  def f(x): return (x.flip(0) + 1).realize(), (x * 2).sum().realize()
  x, ref = Tensor([1.0, 2.0, 3.0, 4.0]).realize(), np.array([1.0, 2.0, 3.0, 4.0])
  for _ in range(6):
    x, s = f(x)
    assert s.item() == (ref * 2).sum()
    ref = ref[::-1] + 1
    np.testing.assert_equal(x.numpy(), ref)


def test_jit_beam_step_with_its_scores_fed_back():
  # the program's pattern: topk over scores + log-probabilities, scores fed back; values from the same loop without TinyJit
  w = Tensor(np.random.default_rng(0).standard_normal((4, 7)).astype(np.float32)).realize()
  def step(scores):
    cand = (scores.reshape(4, 1) + w.log_softmax(-1)).flatten()
    top, idx = cand.topk(4)
    return top.realize(), (idx // 7).cast(dtypes.int32).realize()
  jitted = TinyJit(step)
  s_eager = s_jit = Tensor([0.0, -1e9, -1e9, -1e9]).realize()
  for _ in range(5):
    s_eager, src_eager = step(s_eager)
    s_jit, src_jit = jitted(s_jit)
    np.testing.assert_allclose(s_jit.numpy(), s_eager.numpy(), rtol=1e-6)
    assert src_jit.tolist() == src_eager.tolist()


def test_jit_plain_inputs_are_not_copied():
  @TinyJit
  def f(a): return (a * 2).realize()
  for _ in range(3): a = Tensor([1.0, 2.0]).realize(); f(a)
  a = Tensor([3.0, 4.0]).realize()
  assert f(a).tolist() == [6.0, 8.0]
  (buf,) = tensor_buffers(a)
  assert any(b is buf for ei, _ in f.captured for b in ei.bufs)  # the replay read the input's own buffer


@pytest.mark.parametrize("name", ["sgd", "adamw", "lamb"])
def test_optimizer_device_argument(name):
  # tinygrad's optimizers take device= (where lr and the state live). Expected: tinygrad 0.14 with device=None (with
  # device="CPU:1" tinygrad 0.14 itself raises "all buffers must be on the same device" for SGD; the update is the same)
  expected = {
    "sgd": [[-0.11165, 0.09771], [-4.22632, -321.67316]],
    "adamw": [[0.69891, -1.69495], [0.20372, 2.69171]],
    "lamb": [[0.47761, -1.47292], [-0.00185, 2.47192]],
  }[name]
  mk = {"sgd": lambda p, d: nn.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, device=d),
        "adamw": lambda p, d: nn.optim.AdamW(p, lr=0.1, device=d), "lamb": lambda p, d: nn.optim.LAMB(p, lr=0.1, device=d)}[name]
  other = f"{Device.DEFAULT.split(':')[0]}:1"
  try: Device[other]
  except Exception: other = None  # noqa: BLE001  one GPU: no second instance (CPU and PYTHON have as many as asked)
  for dev in [None] + ([other] if other is not None else []):
    w = Tensor([[1.0, -2.0], [0.5, 3.0]]).contiguous().realize()
    opt = mk([w], dev)
    with Context(TRAINING=1):
      for _ in range(3):
        opt.zero_grad()
        (w * Tensor([[1.0, 2.0], [3.0, 4.0]])).square().sum().backward()
        opt.step()
    assert w.device == Device.DEFAULT.split(":")[0] or w.device == Device.DEFAULT
    np.testing.assert_allclose(w.numpy(), expected, rtol=1e-4, atol=1e-5)
    if dev is not None: assert opt.lr.device == other
