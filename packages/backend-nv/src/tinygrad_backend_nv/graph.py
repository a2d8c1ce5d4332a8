"""CUDA graphs for TinyJit replays: the captured kernels become kernel nodes of one graph (each depending on the one
before, the order they ran in), instantiated once and launched with one cuGraphLaunch per replay.

A launch that changes between replays (new input buffers, other var values, other launch sizes) is patched in the
instantiated graph with cuGraphExecKernelNodeSetParams; a launch with an empty grid is disabled (cuGraphNodeSetEnabled)
rather than given to the driver, which rejects zero-sized grids. Kernel parameters are copied by the driver when a
node is added or updated, so nothing here has to stay alive for the graph's sake; each node's parameters are still kept,
so that an update that changes only argument values (a new position each step) writes them in place and makes one
driver call, without building the parameters again.

A kernel that waits for the grids before it (rendered for sm_90+, cuda.py: `griddepcontrol.wait` first thing) depends on the
kernel before it through a programmatic edge: the GPU may schedule it while that one drains, instead of after it has
finished and its completion has been processed; its wait still orders every memory access after the previous kernel's.
PDL=0 makes every edge a plain one; PDL_PLAIN (comma-separated parts of kernel names, an experiment setting) makes the edge
into every kernel whose name contains one of them plain.
"""
from __future__ import annotations

import ctypes
from typing import Any

from tinygrad.device.plugin import ContextVar, KernelLaunch, getenv

from tinygrad_backend_nv.runtime import CUDAProgram, _Context, _use, check, cu

PDL = getenv("PDL", 1)
PDL_PLAIN = ContextVar("PDL_PLAIN", "")


def _programmatic(program: Any) -> bool:
  """Whether the edge into this kernel is programmatic: it waits for the grid before it, and PDL_PLAIN doesn't name it."""
  if not PDL or not getattr(program, "waits_for_grid", False): return False
  return not any(part and part in program.name for part in str(PDL_PLAIN.value).split(","))


def _early_conflict(before: KernelLaunch, after: KernelLaunch) -> bool:
  """Whether `after` reads a buffer before its wait (CUDAProgram.early_params) that `before` takes as a parameter: `before` may
  still be writing it when `after` starts, so the edge must be plain. (The kernels before `before` have finished by then: `before`
  lets `after` start only once its own wait is over.)"""
  mask = getattr(after.program, "early_params", 0)
  if not mask: return False
  early = {_allocation(b) for i, b in enumerate(after.bufs) if mask >> min(i, 63) & 1}
  return any(_allocation(b) in early for b in before.bufs)


def _allocation(ptr: int) -> int:
  """The start of the allocation holding a device pointer: a buffer's views (pointers into it) count as the buffer."""
  res = cu.cuMemGetAddressRange(ptr)
  return int(res[1]) if res[0] == cu.CUresult.CUDA_SUCCESS else int(ptr)


def _add_edge(graph: Any, before: Any, after: Any, programmatic: bool) -> None:
  """after depends on before: a plain edge, or a programmatic one (after may start once every block of before has started)."""
  data = None
  if programmatic:
    data = cu.CUgraphEdgeData()
    data.type = cu.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
    data.from_port = cu.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC
  if hasattr(cu, "cuGraphAddDependencies_v2"):  # CUDA 12.3+ bindings (in 13 the edge data moved into cuGraphAddDependencies)
    check(cu.cuGraphAddDependencies_v2(graph, [before], [after], [data] if data else None, 1), "cuGraphAddDependencies_v2")
  else: check(cu.cuGraphAddDependencies(graph, [before], [after], [data] if data else None, 1), "cuGraphAddDependencies")


def _dims(xs: tuple[int, ...]) -> tuple[int, int, int]:
  x, y, z = (tuple(xs) + (1, 1, 1))[:3]
  return int(x), int(y), int(z)


class CUDAGraph:
  """One CUDA graph of kernel launches on one GPU (core's GraphExec: `update(i, launch)`, `__call__()`)."""

  def __init__(self, ctx: _Context, launches: list[KernelLaunch]):
    if not launches: raise NotImplementedError("a graph needs at least one kernel")
    for lc in launches:
      if not isinstance(lc.program, CUDAProgram) or lc.program.ctx is not ctx:
        raise NotImplementedError(f"launch of {getattr(lc.program, 'name', lc.program)!r} is not a kernel of this GPU")
    self.ctx = ctx
    self.graph = self.exec = None
    self._build(list(launches))

  def _build(self, launches: list[KernelLaunch]) -> None:
    _use(self.ctx)
    self.launches = launches
    self.programmatic = [i > 0 and _programmatic(lc.program) and not _early_conflict(launches[i - 1], lc) for i, lc in enumerate(launches)]
    self.graph = check(cu.cuGraphCreate(0), "cuGraphCreate")
    self.nodes: list[Any] = []
    self.params: list[tuple[Any, bool, Any]] = []  # per node: (parameters, grid not empty, the argument values they point at)
    self.shapes: list[tuple] = []  # per node: what a launch must keep for its parameters to be patched in place
    empty: list[int] = []
    for i, lc in enumerate(launches):
      assert isinstance(lc.program, CUDAProgram)  # checked by __init__ and update
      params, ok, keep = self._params(lc)
      if not ok: empty.append(i)
      node = check(cu.cuGraphAddKernelNode(self.graph, [], 0, params), f"cuGraphAddKernelNode({lc.program.name})")
      if self.nodes: _add_edge(self.graph, self.nodes[-1], node, self.programmatic[i])
      self.nodes.append(node)
      self.params.append((params, ok, keep))
      self.shapes.append(self._shape(lc))
    self.exec = check(cu.cuGraphInstantiate(self.graph, 0), "cuGraphInstantiate")
    self.enabled = [True] * len(launches)
    for i in empty: self._enable(i, False)

  @staticmethod
  def _params(lc: KernelLaunch) -> tuple[Any, bool, Any]:
    """The node parameters of a launch; False when its grid is empty (the node then has a 1-block grid, disabled); and
    the argument values the parameters point at, to keep alive until the driver has copied them."""
    prg = lc.program
    assert isinstance(prg, CUDAProgram)
    grid, block = _dims(lc.global_size), _dims(lc.local_size)
    if block[0] * block[1] * block[2] > prg.max_threads:
      raise RuntimeError(f"kernel {prg.name}: local size {block} exceeds its limit of {prg.max_threads} threads per block")
    ok = grid[0] * grid[1] * grid[2] > 0
    values, args = prg.arguments(tuple(lc.bufs), tuple(lc.vals))
    p = cu.CUDA_KERNEL_NODE_PARAMS()
    p.func = prg.fn
    p.gridDimX, p.gridDimY, p.gridDimZ = grid if ok else (1, 1, 1)
    p.blockDimX, p.blockDimY, p.blockDimZ = block
    p.sharedMemBytes = prg.shared_bytes
    p.kernelParams = ctypes.addressof(args)  # read (copied) by the driver during the call that takes p
    return p, ok, (values, args)

  @staticmethod
  def _shape(lc: KernelLaunch) -> tuple:
    return (lc.program, _dims(lc.global_size), _dims(lc.local_size), len(lc.bufs), len(lc.vals))

  def _enable(self, i: int, on: bool) -> None:
    if self.enabled[i] != on:
      check(cu.cuGraphNodeSetEnabled(self.exec, self.nodes[i], int(on)), "cuGraphNodeSetEnabled")
      self.enabled[i] = on

  def update(self, i: int, launch: KernelLaunch) -> None:
    if not isinstance(launch.program, CUDAProgram) or launch.program.ctx is not self.ctx:
      raise ValueError("a graph node can only be given launches of a kernel on its own GPU")
    _use(self.ctx)
    old, self.launches[i] = self.launches[i], launch
    if (launch.program is old.program and launch.bufs is old.bufs and launch.global_size == old.global_size
        and launch.local_size == old.local_size and not launch.program.tensor_maps):
      return self._update_vals(i, launch.vals, launch.program.name)  # the decode step's case: a new position, nothing else
    if old.bufs != launch.bufs and any(self.programmatic[j] and _early_conflict(self.launches[j - 1], self.launches[j]) for j in (i, i + 1) if 0 < j < len(self.launches)):
      self._destroy()  # new buffers make a programmatic edge unsafe: the graph again, with that edge plain
      return self._build(self.launches)
    if self._shape(launch) == self.shapes[i] and not launch.program.tensor_maps:  # new argument values, written in place
      params, ok, (values, _) = self.params[i]
      for v, new in zip(values, (*launch.bufs, *launch.vals)): v.value = new
    else:
      params, ok, keep = self.params[i] = self._params(launch)
      self.shapes[i] = self._shape(launch)
    check(cu.cuGraphExecKernelNodeSetParams(self.exec, self.nodes[i], params), f"cuGraphExecKernelNodeSetParams({launch.program.name})")
    self._enable(i, ok)

  def _update_vals(self, i: int, vals: tuple[int, ...], name: str) -> None:
    """Node i's launch with new var values only: they are written into the argument values its parameters point at, and
    the driver reads the parameters again (one call; no parameters rebuilt, no launch compared)."""
    params, _, (values, _) = self.params[i]
    for v, new in zip(values[len(values) - len(vals):], vals): v.value = new
    res = cu.cuGraphExecKernelNodeSetParams(self.exec, self.nodes[i], params)
    if res[0] != cu.CUresult.CUDA_SUCCESS: check(res, f"cuGraphExecKernelNodeSetParams({name})")

  def __call__(self) -> None:
    _use(self.ctx)
    check(cu.cuGraphLaunch(self.exec, 0), "cuGraphLaunch")  # on the legacy default stream, in order with the other work

  def _destroy(self) -> None:
    if getattr(self, "exec", None) is not None: cu.cuGraphExecDestroy(self.exec)
    if getattr(self, "graph", None) is not None: cu.cuGraphDestroy(self.graph)
    self.exec = self.graph = None

  def __del__(self) -> None:
    try:
      if cu is None: return
      self._destroy()
    except Exception:  # noqa: BLE001  interpreter shutdown
      pass
