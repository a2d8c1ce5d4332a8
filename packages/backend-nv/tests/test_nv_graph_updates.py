"""CUDAGraph.update without a GPU (the driver replaced by a recorder): a launch that changes only its var values (a decode
step's new position) is written into the node's kept argument values with one driver call; other changes rebuild the node's
parameters. The same updates on a GPU, with results checked: test_nv_graph.py."""
from __future__ import annotations

import ctypes
from types import SimpleNamespace

import pytest
from tinygrad.device.plugin import KernelLaunch

graph = pytest.importorskip("tinygrad_backend_nv.graph")
runtime = pytest.importorskip("tinygrad_backend_nv.runtime")


class _Params:  # stands in for CUDA_KERNEL_NODE_PARAMS: the fields _params sets
  kernelParams = 0


@pytest.fixture
def driver(monkeypatch):
  """A stand-in for cuda-bindings that records each node's kernel parameters (the int32 var values they point at) as the driver
  would read them, and counts the calls."""
  rec = SimpleNamespace(set_params=0, enabled={}, seen=[])

  def read(params: _Params, n_bufs: int, n_vals: int) -> tuple[int, ...]:
    ptrs = (ctypes.c_void_p * (n_bufs + n_vals)).from_address(params.kernelParams)
    return tuple(ctypes.c_int32.from_address(p).value for p in ptrs[n_bufs:])

  def set_params(exec_, node, params):
    rec.set_params += 1
    rec.seen.append((node, params))
    return (0,)

  ok = SimpleNamespace(CUDA_SUCCESS=0)
  cu = SimpleNamespace(CUresult=ok, CUDA_KERNEL_NODE_PARAMS=_Params, cuGraphCreate=lambda flags: (0, "graph"),
                       cuGraphAddKernelNode=lambda g, deps, n, p: (0, object()), cuGraphInstantiate=lambda g, f: (0, "exec"),
                       cuGraphExecKernelNodeSetParams=set_params, cuCtxSetCurrent=lambda c: (0,),
                       cuGraphNodeSetEnabled=lambda e, node, on: rec.enabled.__setitem__(node, on) or (0,),
                       cuGraphAddDependencies=lambda *a: (0,), cuGraphLaunch=lambda e, s: (0,),
                       cuGraphExecDestroy=lambda e: None, cuGraphDestroy=lambda g: None)
  monkeypatch.setattr(graph, "cu", cu)
  monkeypatch.setattr(runtime, "cu", cu)
  rec.read = read
  return rec


def _program(ctx, name: str):
  prg = runtime.CUDAProgram.__new__(runtime.CUDAProgram)  # no module to load: only what a graph node reads
  prg.ctx, prg.name, prg.tensor_maps, prg.max_threads, prg.fn, prg.shared_bytes = ctx, name, [], 1024, object(), 0
  prg.waits_for_grid, prg.early_params = False, 0
  return prg


def _graph(driver):
  ctx = runtime._Context.__new__(runtime._Context)
  ctx.ctx = object()
  progs = [_program(ctx, "attention"), _program(ctx, "matvec")]
  launches = [KernelLaunch(progs[0], (0x1000, 0x2000), (8, 1, 1), (128, 1, 1), (72, 3)),
              KernelLaunch(progs[1], (0x3000,), (4, 1, 1), (64, 1, 1), ())]
  return graph.CUDAGraph(ctx, launches), launches


def test_new_var_values_are_written_in_place_with_one_driver_call(driver) -> None:
  g, launches = _graph(driver)
  params_before = g.params[0][0]
  g.update(0, KernelLaunch(launches[0].program, launches[0].bufs, (8, 1, 1), (128, 1, 1), (73, 3)))
  assert driver.set_params == 1
  node, params = driver.seen[-1]
  assert node is g.nodes[0] and params is params_before  # the kept parameters, not new ones
  assert driver.read(params, 2, 2) == (73, 3)
  g.update(0, KernelLaunch(launches[0].program, launches[0].bufs, (8, 1, 1), (128, 1, 1), (74, 5)))
  assert driver.read(driver.seen[-1][1], 2, 2) == (74, 5) and driver.set_params == 2
  assert g.launches[0].vals == (74, 5)


def test_other_changes_rebuild_the_parameters(driver) -> None:
  g, launches = _graph(driver)
  lc = launches[0]
  g.update(0, KernelLaunch(lc.program, lc.bufs, (16, 1, 1), (128, 1, 1), (80, 3)))  # a new grid
  params = driver.seen[-1][1]
  assert (params.gridDimX, driver.read(params, 2, 2)) == (16, (80, 3))
  g.update(0, KernelLaunch(lc.program, (0x1000, 0x5000), (16, 1, 1), (128, 1, 1), (81, 3)))  # a new buffer
  ptrs = (ctypes.c_void_p * 4).from_address(driver.seen[-1][1].kernelParams)
  assert ctypes.c_uint64.from_address(ptrs[1]).value == 0x5000 and driver.read(driver.seen[-1][1], 2, 2) == (81, 3)
  g.update(1, KernelLaunch(launches[1].program, launches[1].bufs, (0, 1, 1), (64, 1, 1), ()))  # an empty grid: disabled
  assert driver.enabled[g.nodes[1]] == 0 and not g.enabled[1]
