"""Save and load a model's weights: state dicts, safetensors, and torch checkpoints.

  1. get_state_dict(model) names every Tensor reachable from the model by attribute path ("body.0.weight").
  2. safe_save writes them as a .safetensors file (with string metadata); safe_load reads it back lazily: each
     tensor is a view of the file on the DISK device, and nothing is read until it is used.
  3. load_state_dict(model, sd) moves each tensor to the device of the model's tensor of the same name.
  4. If torch is importable: a torch module with the same layer names is saved with torch.save, loaded with
     torch_load (a restricted unpickler: it never runs code from the file) into our model, and both models
     compute the same outputs. Without torch this part is skipped.

  uv run python examples/save_load.py                 # default device (CPU with LLVM)
  DEV=CPU:CLANG uv run python examples/save_load.py   # C kernels through clang
  DEV=PYTHON uv run python examples/save_load.py      # the UOp interpreter
"""
import os
import tempfile

import numpy as np
from tinygrad import Tensor, nn
from tinygrad.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_load_metadata, safe_save, torch_load


class Net:
  def __init__(self):
    self.body = [nn.Linear(6, 16), nn.LayerNorm(16), nn.Linear(16, 3)]
    self.norm = nn.BatchNorm(3)  # has buffers as well as parameters: running_mean, running_var, num_batches_tracked

  def __call__(self, x: Tensor) -> Tensor:
    lin1, ln, lin2 = self.body
    return self.norm(lin2(ln(lin1(x)).gelu()))


def safetensors_round_trip(tmp: str, x: Tensor) -> None:
  Tensor.manual_seed(1)
  model = Net()
  sd = get_state_dict(model)
  print("state dict of Net:")
  for name, t in sd.items(): print(f"   {name:26s} {str(t.shape):10s} {t.dtype}")

  path = os.path.join(tmp, "net.safetensors")
  safe_save(sd, path, metadata={"format": "example", "epoch": "7"})
  print(f"wrote {path} ({os.path.getsize(path)} bytes)")

  _, data_start, header = safe_load_metadata(path)
  print(f"   header: {len(header) - 1} tensors, metadata {header['__metadata__']}, data starts at byte {data_start}")
  loaded = safe_load(path)
  print(f"   safe_load -> body.0.weight lives on {loaded['body.0.weight'].device} until it is moved")

  Tensor.manual_seed(2)
  fresh = Net()  # different random weights...
  before = (fresh(x) - model(x)).abs().max().item()
  load_state_dict(fresh, loaded, verbose=False)  # ...replaced by the saved ones
  after = (fresh(x) - model(x)).abs().max().item()
  print(f"   max |difference| of outputs: {before:.4f} before load_state_dict, {after} after")
  print(f"   fresh.body.0.weight is on {fresh.body[0].weight.device} again")


def torch_round_trip(tmp: str, x: Tensor) -> None:
  try:
    import torch
  except ImportError:
    print("torch is not installed: skipping the torch_load part (uv pip install torch to run it)")
    return

  class TorchNet(torch.nn.Module):  # the same names as Net.body: a ModuleList is numbered like our list
    def __init__(self):
      super().__init__()
      self.body = torch.nn.ModuleList([torch.nn.Linear(6, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 3)])

    def forward(self, x):
      return self.body[2](torch.nn.functional.gelu(self.body[1](self.body[0](x)), approximate="tanh"))

  torch.manual_seed(0)
  tnet = TorchNet()
  path = os.path.join(tmp, "net.pt")
  torch.save(tnet.state_dict(), path)
  sd = torch_load(path)
  print(f"torch_load({os.path.basename(path)}): {', '.join(f'{k} {tuple(v.shape)}' for k, v in sd.items())}")

  ours = Net()
  load_state_dict(ours, sd, strict=False, verbose=False)  # strict=False: the torch net has no BatchNorm `norm`
  lin1, ln, lin2 = ours.body
  mine = lin2(ln(lin1(x)).gelu()).numpy()
  with torch.no_grad(): theirs = tnet(torch.from_numpy(x.numpy())).numpy()
  print(f"   same weights, same outputs: max |ours - torch| = {np.abs(mine - theirs).max():.2e}")


def main() -> None:
  x = Tensor(np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32)).realize()
  with tempfile.TemporaryDirectory() as tmp:
    safetensors_round_trip(tmp, x)
    torch_round_trip(tmp, x)
  print(f"(a Net has {sum(t.numel() for t in get_parameters(Net()))} numbers in its state)")


if __name__ == "__main__":
  main()
