"""The on-disk cache of lowered programs (engine/program_cache.py): what it keys on, that a hit skips the lowering, and that a
program served from it computes what a freshly lowered one does."""
import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import is_null_device
from tinygrad import Context, Device, Tensor, dtypes, helpers
from tinygrad.codegen.heuristics import GROUP_REDUCE
from tinygrad.codegen.program import ProgramSpec
from tinygrad.engine import program_cache, realize
from tinygrad.helpers import ContextVar
from tinygrad.uop.ops import UOp


@pytest.fixture
def disk_cache(tmp_path, monkeypatch: pytest.MonkeyPatch):
  """An empty on-disk cache, the program cache on, and the in-memory runners forgotten (as in a fresh process)."""
  monkeypatch.setattr(helpers, "CACHEDB", str(tmp_path / "cache.db"))
  monkeypatch.setattr(helpers, "_db_conn", None)
  monkeypatch.setattr(realize, "_runner_cache", {})
  with Context(CACHELEVEL=2, PCACHE=1): yield
  if helpers._db_conn is not None: helpers._db_conn.close()


@pytest.fixture
def lowerings(monkeypatch: pytest.MonkeyPatch) -> list[UOp]:
  """The ASTs really lowered (get_program called) from here on."""
  seen: list[UOp] = []
  real = realize.get_program
  def counted(ast, *args, **kwargs):
    seen.append(ast)
    return real(ast, *args, **kwargs)
  monkeypatch.setattr(realize, "get_program", counted)
  return seen


def kernel_ast(t: Tensor) -> UOp:
  (si,) = [si for si in t.schedule() if si.ast.op.name != "COPY"]
  return si.ast


def sum_ast(shape=(16, 32), dtype=dtypes.float32, device: str | None = None) -> UOp:
  return kernel_ast((Tensor.empty(*shape, dtype=dtype, device=device) * 2).sum(axis=1))


def key(ast: UOp, renderer=None) -> str:
  renderer = renderer or Device.renderer(Device.DEFAULT)
  return program_cache.program_key(ast, renderer, realize.opt_setting())


@pytest.mark.compile_only
def test_hit_on_identical_ast_skips_lowering(disk_cache, lowerings: list[UOp]):
  renderer = Device.renderer(Device.DEFAULT)
  ast = sum_ast()
  first = realize._program(ast, renderer)
  assert lowerings == [ast]
  hits = program_cache.stats["hits"]
  again = realize._program(sum_ast(), renderer)  # the same structure, built again (interned: the same UOp)
  assert lowerings == [ast], "served from the disk cache, not lowered again"
  assert program_cache.stats["hits"] == hits + 1
  assert isinstance(again, ProgramSpec) and again is not first
  assert (again.name, again.src, again.globals, again.outs, again.global_size, again.local_size, again.opts) == \
         (first.name, first.src, first.globals, first.outs, first.global_size, first.local_size, first.opts)
  assert first.uops and again.uops == [], "stored without its UOps: a hit serves a runner, which doesn't need them"


@pytest.mark.compile_only
def test_key_is_stable_for_the_structure_not_the_buffers():
  # two kernels over different buffers (the layers of a model) share a key; the key is text, the same in any process
  assert key(sum_ast()) == key(sum_ast())
  a, b = Tensor.empty(16, 32), Tensor.empty(16, 32)
  assert key(kernel_ast((a * 2).sum(axis=1))) == key(kernel_ast((b * 2).sum(axis=1)))


@pytest.mark.compile_only
def test_key_misses_on_dtype_shape_renderer_and_opts():
  base = key(sum_ast())
  assert key(sum_ast(dtype=dtypes.int32)) != base
  assert key(sum_ast(shape=(16, 64))) != base
  assert key(kernel_ast((Tensor.empty(16, 32) * 3).sum(axis=1))) != base  # another constant
  assert key(kernel_ast((Tensor.empty(16, 32) * 2).max(axis=1))) != base  # another op
  for field, value in (("arch", "another_arch"), ("threads", 7), ("has_local", True), ("supports_float4", True), ("compute_units", 99)):
    other = copy.copy(Device.renderer(Device.DEFAULT))
    if getattr(other, field) == value: continue
    setattr(other, field, value)
    assert key(sum_ast(), other) != base, f"a renderer with another {field}"
  with Context(NOOPT=1): assert key(sum_ast()) != base  # what decides the opts
  with Context(GROUP_REDUCE=int(not GROUP_REDUCE.value)): assert key(sum_ast()) != base  # any other setting in force
  with Context(DEBUG=1): assert key(sum_ast()) == base  # a setting that changes no program


@pytest.mark.compile_only
def test_key_ignores_settings_at_their_default():
  # a compile worker imports less than this process (fewer settings registered): at their defaults they must not change the key
  base = key(sum_ast())
  ContextVar("PROGRAM_CACHE_TEST_SETTING", 0)
  assert key(sum_ast()) == base
  with Context(PROGRAM_CACHE_TEST_SETTING=1): assert key(sum_ast()) != base


@pytest.mark.compile_only
def test_key_misses_when_the_lowering_code_changes(monkeypatch: pytest.MonkeyPatch):
  renderer = Device.renderer(Device.DEFAULT)
  base = key(sum_ast())
  monkeypatch.setitem(program_cache._code_digests, type(renderer), "an edited codegen")
  assert key(sum_ast()) != base


@pytest.mark.compile_only
def test_not_used_where_the_lowering_is_searched_watched_or_checked(disk_cache, lowerings: list[UOp]):
  renderer, ast = Device.renderer(Device.DEFAULT), sum_ast()
  realize._program(ast, renderer)
  for setting in ({"PCACHE": 0}, {"CACHELEVEL": 0}, {"VERIFY": 1}):
    with Context(**setting): realize._program(ast, renderer)
  assert len(lowerings) == 4
  assert not program_cache.cacheable(ast, beam=2)


@pytest.mark.compile_only
def test_viz_sees_every_lowering_even_of_a_cached_program(disk_cache, lowerings: list[UOp]):
  """VIZ=1 records the rewrite steps of each kernel: a program served from disk would show none (a cached run of the VIZ test
  recorded no kernels)."""
  from tinygrad.viz import disable, enable
  renderer, ast = Device.renderer(Device.DEFAULT), sum_ast(shape=(13, 29))
  realize._program(ast, renderer)  # now on disk
  enable()
  try: realize._program(ast, renderer)
  finally: trace = disable()
  assert len(lowerings) == 2
  assert trace is not None and any(k["kind"] == "kernel" and k["steps"] for k in trace["kernels"])


def test_outputs_equal_with_and_without_the_cache(disk_cache, lowerings: list[UOp]):
  if is_null_device(): pytest.skip("the NULL device has no data")
  x = np.random.default_rng(0).standard_normal((24, 40)).astype(np.float32)
  def f() -> np.ndarray: return ((Tensor(x) * 2 + 1).relu().sum(axis=1) / 3).numpy()
  with Context(PCACHE=0): plain = f()
  lowered = len(lowerings)
  realize._runner_cache.clear()
  cold = f()  # lowered and stored
  realize._runner_cache.clear()
  warm = f()  # every kernel from the disk cache
  assert len(lowerings) == 2 * lowered, "the warm run lowered nothing"
  np.testing.assert_allclose(cold, plain, rtol=1e-6)
  np.testing.assert_array_equal(warm, cold)
  np.testing.assert_allclose(warm, ((x * 2 + 1).clip(0, None).sum(axis=1) / 3), rtol=1e-5)



@pytest.mark.compile_only
def test_hit_on_a_program_another_process_lowered(tmp_path):
  # the point of the cache: the key is the same in a fresh process (UOp identities are not, nor the settings registered). Both
  # sides are fresh processes: this one's settings are whatever the tests before changed
  code = ("import json\nfrom tinygrad import Tensor\nfrom tinygrad.engine import program_cache\n"
          "(Tensor.empty(16, 32) * 2).sum(axis=1).realize()\nprint(json.dumps(program_cache.stats))")
  env = {**os.environ, "CACHEDB": str(tmp_path / "cache.db"), "PCACHE": "1", "CACHELEVEL": "2"}
  def run() -> dict:
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])
  assert run() == {"hits": 0, "misses": 1}
  assert run() == {"hits": 1, "misses": 0}
