"""Optimizers with tinygrad's names and defaults: SGD, LARS, Muon, Adam, AdamW, LAMB.

`step()` builds every parameter's update (and the optimizer state's) lazily and realizes them all in one schedule,
so each gradient is computed from the old weights before any weight is overwritten."""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import cast

from tinygrad.dtype import dtypes, least_upper_dtype
from tinygrad.helpers import dedup
from tinygrad.schedule.kernelize import is_contiguous_buffer
from tinygrad.tensor import Tensor


def _filled(shape: tuple[int, ...], value: float, device: str) -> Tensor:
  """Optimizer state: float32 with a buffer of its own (identical `zeros(...).contiguous()` graphs would share one)."""
  # filled now: its first update is then the only assign on it in the step's schedule (a pending fill would join that
  # schedule as an assign chained before the update)
  return Tensor.empty(*shape, dtype=dtypes.float32, device=device, requires_grad=False).assign(
    Tensor.full(shape, value, dtype=dtypes.float32, device=device)).realize()


class Optimizer:
  """Base class: holds the parameters (tensors with requires_grad) and the learning rate as a tensor, so it can change
  without recompiling (`opt.lr.assign(Tensor([0.01])).realize()`)."""
  def __init__(self, params: Sequence[Tensor], lr: float, device: str | tuple[str, ...] | None = None, fused: bool = False):
    if isinstance(lr, (int, float)) and lr < 0: raise ValueError(f"Invalid learning rate: {lr}")  # tinygrad's (and torch's) check
    for x in params:
      if x.requires_grad is None: x.requires_grad_(True)
    self.params: list[Tensor] = dedup([x for x in params if x.requires_grad])
    if not self.params: raise ValueError("optimizer needs at least one parameter with requires_grad")
    self.buffers: list[Tensor] = dedup([x for x in params if not x.requires_grad])  # realized with each step, not updated
    # device (tinygrad's argument): where the learning rate and the optimizer state live (say, the CPU while the weights are on
    # a GPU); gradients go there for the update and the update comes back to each weight's device
    self.device: str = cast(str, device) if device is not None else self.params[0].device  # a tuple when sharded, as Tensor.device
    self.state_device = device if device is not None and not isinstance(device, tuple) else None
    self.lr = Tensor([lr], requires_grad=False, device=self.device, dtype=least_upper_dtype(dtypes.default_float, dtypes.float32))
    # fused: every parameter (and gradient) is flattened and concatenated, so the update is one set of tensors
    self.fused = fused
    self.offsets = list(itertools.accumulate((p.numel() for p in self.params), initial=0))

  def _lr(self) -> Tensor | float:
    """The learning rate for _step: a program may replace the tensor with a float or a 0-d tensor (`opt.lr = 0.01`), as in tinygrad."""
    lr: Tensor | float = self.lr
    return lr.reshape(()) if isinstance(lr, Tensor) else lr

  def _zeros_like_params(self) -> list[Tensor]:
    if self.fused: return [_filled((self.offsets[-1],), 0.0, self.device)]
    return [_filled(t.shape, 0.0, self.state_device or t.device) for t in self.params]

  def _to_state(self, t: Tensor) -> Tensor:
    """A weight or gradient moved to the optimizer state's device (given as `device`), where the update is computed."""
    return t if self.state_device is None or t.device == self.state_device else t.contiguous().to(self.state_device)

  def zero_grad(self) -> None:
    for p in self.params: p.grad = None

  def step(self) -> None:
    """One update of every parameter, realized together."""
    Tensor.realize_all(*self.schedule_step())

  def schedule_step(self) -> list[Tensor]:
    """Assign the updates lazily; returns the tensors to realize (buffers, optimizer state, parameters)."""
    if not Tensor.training: raise RuntimeError("Tensor.training is False (TRAINING=0): Optimizer.step() needs training mode; set Tensor.training = True "
                                           "or run the step inside `with Context(TRAINING=1):` (or `with Tensor.train():`)")
    for p in self.params:
      if p.grad is None: raise RuntimeError(f"parameter {p} has no gradient: call backward() first")
    # each gradient gets a buffer of its own first: fused into the updates, the update of one weight could read another
    # weight that an earlier update kernel already overwrote (updates that read each other's weights form a cycle)
    # .grad becomes that buffer, realized with the step: a lazy gradient reads the weights, so read after the update (or summed
    # into the next step's gradient without zero_grad) it was the gradient at the new weights, not the one the step used
    for p in self.params:
      if p.grad is not None and not is_contiguous_buffer(p.grad.uop): p.grad = p.grad.contiguous()
    grads = [p.grad for p in self.params if p.grad is not None]
    if self.fused:
      # (the concatenated weights get a buffer too: every update reads all of them, e.g. through LAMB's norms)
      flat, state = self._step([_flat_cat([p.detach() for p in self.params]).contiguous()], [_flat_cat(grads).contiguous()])
      new = [flat[0].shrink(((a, b),)).reshape(p.shape) for p, a, b in zip(self.params, self.offsets, self.offsets[1:])]
    else: new, state = self._step(self.params, grads)
    for p, n in zip(self.params, new): p.assign((n if n.device == p.device else n.to(p.device)).cast(p.dtype))
    # buffers first: a lazy update of one (say batchnorm's running mean) may read weights that this step overwrites
    return self.buffers + state + grads + self.params

  def _step(self, params: list[Tensor], grads: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]: raise NotImplementedError


class OptimizerGroup(Optimizer):
  """Several optimizers (say, one per group of parameters) stepped as one."""
  def __init__(self, *optimizers: Optimizer):
    self.optimizers = optimizers
    self.params, self.buffers = [p for o in optimizers for p in o.params], [b for o in optimizers for b in o.buffers]
  def __getitem__(self, i: int) -> Optimizer: return self.optimizers[i]
  def zero_grad(self) -> None:
    for o in self.optimizers: o.zero_grad()
  def schedule_step(self) -> list[Tensor]: return [t for o in self.optimizers for t in o.schedule_step()]


class LARS(Optimizer):
  """SGD with momentum, weight decay and LARS trust-ratio scaling (tcoef > 0); with ns_steps > 0 the update is
  orthogonalized by Newton-Schulz iterations (Muon)."""
  def __init__(self, params: Sequence[Tensor], lr: float = 0.001, momentum: float = 0.9, weight_decay: float = 1e-4, ns_steps: int = 0,
               ns_coefficients: tuple[float, ...] | None = None, nesterov: bool = False, classic: bool = True, pre_wd: bool = True, tcoef: float = 0.001,
               device: str | tuple[str, ...] | None = None, fused: bool = False):
    if fused and ns_steps: raise ValueError("Muon (ns_steps > 0) orthogonalizes each matrix: it can't be fused")
    if momentum < 0: raise ValueError(f"Invalid momentum value: {momentum}")
    super().__init__(params, lr, device, fused)
    self.momentum, self.wd, self.nesterov, self.classic, self.pre_wd, self.tcoef = momentum, weight_decay, nesterov, classic, pre_wd, tcoef
    self.ns_steps, self.ns_coefficients = ns_steps, ns_coefficients
    self.b = self._zeros_like_params() if self.momentum else []

  def _step(self, params: list[Tensor], grads: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    lr, out = self._lr(), []
    for i, (t, g) in enumerate(zip(params, grads)):
      t, g = self._to_state(t.detach()), self._to_state(g.cast(dtypes.float32))
      r: Tensor | float = 1.0
      if self.tcoef != 0:
        r1, r2 = t.square().sum().sqrt(), g.square().sum().sqrt()
        r = (r1 > 0).where((r2 > 0).where(self.tcoef * r1 / (r2 + self.wd * r1), 1.0), 1.0)
      if self.pre_wd and self.wd > 0: g = g + self.wd * t
      if self.classic: g = g * r * lr  # classic momentum accumulates lr-scaled steps
      if self.momentum:
        self.b[i].assign(self.momentum * self.b[i] + g)
        g = g + self.momentum * self.b[i] if self.nesterov else self.b[i]
      if self.ns_steps: g = g.reshape(g.shape[0], -1).newton_schulz(self.ns_steps, self.ns_coefficients or (3.4445, -4.775, 2.0315)).reshape(g.shape)
      if not self.classic: g = g * r * lr
      if not self.pre_wd and self.wd > 0: t = t * (1.0 - self.wd * lr)
      out.append(t - g)
    return out, self.b


def _flat_cat(ts: list[Tensor]) -> Tensor:
  flat = [t.cast(dtypes.float32).reshape(-1) for t in ts]
  return flat[0].cat(*flat[1:]) if len(flat) > 1 else flat[0]


def SGD(params: Sequence[Tensor], lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
        classic: bool = False, device: str | tuple[str, ...] | None = None, fused: bool = False) -> LARS:
  """Stochastic gradient descent: torch's update (classic=False: lr scales the momentum buffer) or the classic one
  (classic=True: the buffer accumulates lr-scaled gradients)."""
  return LARS(params, lr, momentum, weight_decay, 0, None, nesterov, classic=classic, pre_wd=True, tcoef=0.0, device=device, fused=fused)


def Muon(params: Sequence[Tensor], lr: float = 0.001, momentum: float = 0.95, weight_decay: float = 0.1, ns_steps: int = 5,
         ns_coefficients: tuple[float, ...] = (3.4445, -4.775, 2.0315), nesterov: bool = True, device: str | tuple[str, ...] | None = None,
         fused: bool = False) -> LARS:
  """Momentum SGD whose update is orthogonalized by Newton-Schulz iterations, with decoupled weight decay (tinygrad's
  defaults: lr 0.001, weight_decay 0.1)."""
  return LARS(params, lr, momentum, weight_decay, ns_steps, ns_coefficients, nesterov, classic=False, pre_wd=False, tcoef=0.0, device=device,
              fused=fused)


class LAMB(Optimizer):
  """Adam moments with a layer-wise trust ratio ||w|| / ||update||; adam=True drops the ratio (AdamW)."""
  def __init__(self, params: Sequence[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6, weight_decay: float = 0.0,
               adam: bool = False, device: str | tuple[str, ...] | None = None, fused: bool = False):
    if weight_decay < 0: raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    super().__init__(params, lr, device, fused)
    self.b1, self.b2, self.eps, self.wd, self.adam = b1, b2, eps, weight_decay, adam
    self.b1_t, self.b2_t = _filled((1,), 1.0, self.device), _filled((1,), 1.0, self.device)
    self.m, self.v = self._zeros_like_params(), self._zeros_like_params()

  def _step(self, params: list[Tensor], grads: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    self.b1_t.assign(self.b1_t * self.b1)
    self.b2_t.assign(self.b2_t * self.b2)
    lr, b1_t, b2_t, out = self._lr(), self.b1_t.reshape(()), self.b2_t.reshape(()), []
    for i, (t, g) in enumerate(zip(params, grads)):
      t, g = self._to_state(t.detach()), self._to_state(g.cast(dtypes.float32))
      self.m[i].assign(self.b1 * self.m[i] + (1.0 - self.b1) * g)
      self.v[i].assign(self.b2 * self.v[i] + (1.0 - self.b2) * (g * g))
      m_hat, v_hat = self.m[i] / (1.0 - b1_t), self.v[i] / (1.0 - b2_t)
      up = m_hat / (v_hat.sqrt() + self.eps) + self.wd * t
      r: Tensor | float = 1.0
      if not self.adam:
        r1, r2 = t.square().sum().sqrt(), up.square().sum().sqrt()
        r = (r1 > 0).where((r2 > 0).where(r1 / r2, 1.0), 1.0)
      out.append(t - lr * r * up)
    return out, [self.b1_t, self.b2_t, *self.m, *self.v]


def AdamW(params: Sequence[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.01,
          device: str | tuple[str, ...] | None = None, fused: bool = False) -> LAMB:
  """Adam with decoupled weight decay."""
  return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True, device=device, fused=fused)


def Adam(params: Sequence[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
         device: str | tuple[str, ...] | None = None, fused: bool = False) -> LAMB:
  return LAMB(params, lr, b1, b2, eps, 0.0, adam=True, device=device, fused=fused)


__all__ = ["Optimizer", "OptimizerGroup", "LARS", "SGD", "Muon", "LAMB", "Adam", "AdamW"]
