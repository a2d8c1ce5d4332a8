"""Parity with torch: run the same op in torch (CPU) and tinygrad on the same inputs, compare values and gradients.

    check(lambda x, y: x + y, [(3, 4), (4,)])                        # float32 inputs, forward and backward
    check(lambda x: x.argmax(1), [(3, 4)], grad=False)
    check(lambda x: x.relu(), [(3, 4)], torch_fn=lambda x: torch.relu(x))

`fn` receives tinygrad Tensors or torch tensors and must work for both (most tinygrad method names match
torch's); pass `torch_fn` when they differ.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tinygrad import Tensor  # noqa: E402

Shape = tuple[int, ...]


def make_inputs(shapes: Sequence[Shape | np.ndarray], low: float = -2.0, high: float = 2.0, dtype: Any = np.float32,
                seed: int = 0) -> list[np.ndarray]:
  rng = np.random.default_rng(seed)
  out = []
  for s in shapes:
    if isinstance(s, np.ndarray): out.append(s)
    elif np.issubdtype(np.dtype(dtype), np.integer): out.append(rng.integers(int(low), int(high), size=s).astype(dtype))
    elif np.dtype(dtype) == np.bool_: out.append(rng.random(size=s) < 0.5)
    else: out.append(rng.uniform(low, high, size=s).astype(dtype))
  return out


def _to_numpy(x: Any) -> np.ndarray:
  if isinstance(x, Tensor): return x.numpy()
  if isinstance(x, torch.Tensor): return x.detach().cpu().numpy()
  return np.asarray(x)


def compare(ours: Any, theirs: Any, atol: float, rtol: float, what: str) -> None:
  ours_np, theirs_np = _to_numpy(ours), _to_numpy(theirs)
  assert ours_np.shape == theirs_np.shape, f"{what}: shape {ours_np.shape} != torch's {theirs_np.shape}"
  if ours_np.dtype == np.bool_ or np.issubdtype(ours_np.dtype, np.integer):
    np.testing.assert_array_equal(ours_np, theirs_np.astype(ours_np.dtype), err_msg=what)
  else:
    np.testing.assert_allclose(ours_np.astype(np.float64), theirs_np.astype(np.float64), atol=atol, rtol=rtol, err_msg=what)


def check(fn: Callable[..., Any], shapes: Sequence[Shape | np.ndarray], torch_fn: Callable[..., Any] | None = None,
          grad: bool = True, atol: float = 1e-5, rtol: float = 1e-4, grad_atol: float = 1e-4, grad_rtol: float = 1e-3,
          low: float = -2.0, high: float = 2.0, dtype: Any = np.float32, inputs: Sequence[np.ndarray] | None = None) -> None:
  """Forward values (and, with grad=True, gradients of sum(out * upstream) w.r.t. every float input) match torch."""
  arrays = list(inputs) if inputs is not None else make_inputs(shapes, low, high, dtype)
  is_float = [np.issubdtype(a.dtype, np.floating) for a in arrays]
  ours_in = [Tensor(a, requires_grad=grad and f) for a, f in zip(arrays, is_float)]
  theirs_in = [torch.tensor(a, requires_grad=grad and f) for a, f in zip(arrays, is_float)]
  ours_out, theirs_out = fn(*ours_in), (torch_fn or fn)(*theirs_in)
  compare(ours_out, theirs_out, atol, rtol, "forward")
  if not grad or not any(is_float): return
  upstream = np.random.default_rng(1).uniform(0.5, 1.5, size=tuple(theirs_out.shape)).astype(np.float32)
  (theirs_out * torch.tensor(upstream, dtype=theirs_out.dtype)).sum().backward()
  (ours_out * Tensor(upstream).cast(ours_out.dtype)).sum().backward()
  for i, (o, t) in enumerate(zip(ours_in, theirs_in)):
    if t.grad is None: continue
    assert o.grad is not None, f"input {i}: torch has a gradient, we have none"
    compare(o.grad, t.grad, grad_atol, grad_rtol, f"gradient of input {i}")
