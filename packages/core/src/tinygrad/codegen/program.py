"""Per kernel: AST -> (optimize) -> lower -> linearize -> render. The result is a `ProgramSpec`."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

from tinygrad.codegen.custom import is_hand_written, lower_hand_ranges
from tinygrad.codegen.dot import byte_dots
from tinygrad.codegen.early_loads import EARLY_LOADS, early_loads, resident_threads
from tinygrad.codegen.gpudims import DEFAULT_LOCAL, to_thread_indices
from tinygrad.codegen.group import lower_groups
from tinygrad.codegen.heuristics import GROUP_REDUCE, hand_coded_opts
from tinygrad.codegen.lanes import keep_lanes
from tinygrad.codegen.linearize import linearize
from tinygrad.codegen.lower import cleanup, close_loops, lower_reduces
from tinygrad.codegen.opt import KernelOptError, Opt, OptOps, apply_opts
from tinygrad.codegen.prefetch import mark_prefetches
from tinygrad.codegen.rows import gpu_row_opts, row_loop_opts
from tinygrad.codegen.tensor_core import lower_tensor_core, tc_opts
from tinygrad.codegen.threads import split_for_threads
from tinygrad.codegen.vectorize import PAIRS, vectorize_memory
from tinygrad.helpers import DEBUG, NOOPT, VERIFY, prod
from tinygrad.renderer import Renderer
from tinygrad.uop.ops import STORE_ADD, Ops, UOp
from tinygrad.uop.rewrite import graph_rewrite
from tinygrad.uop.verify import verify_kernel, verify_linear


@dataclass
class ProgramSpec:
  """A rendered kernel and what it takes to launch it."""
  name: str
  src: str
  device: str
  uops: list[UOp]
  globals: list[int] = field(default_factory=list)       # DEFINE_GLOBAL numbers in parameter order
  outs: list[int] = field(default_factory=list)          # which globals are written
  vars: list[UOp] = field(default_factory=list)          # DEFINE_VARs in parameter order
  global_size: tuple = (1, 1, 1)   # entries may be symbolic (UOps of DEFINE_VARs): see launch_dims
  local_size: tuple = (1, 1, 1)

  def launch_dims(self, var_vals: dict[str, int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    from tinygrad.uop.symbolic import sym_infer
    def ev(xs: tuple) -> tuple[int, ...]: return tuple(x if isinstance(x, int) else sym_infer(x, var_vals) for x in xs)
    return ev(self.global_size), ev(self.local_size)
  estimated_ops: int = 0
  estimated_mem: int = 0
  opts: list[Opt] = field(default_factory=list)          # the optimizations applied (heuristics, BEAM, or given)
  lib: bytes | None = None                               # a binary handed in (a PROGRAM with BINARY): loaded, not compiled

  def runnable(self) -> ProgramSpec:
    """This program without its linearized UOps: what running it needs (the source, launch sizes, parameters). A runner, the
    disk cache and the compile pool keep or pass only this: an LLM's kernels held thousands of UOps each (SmolLM2 on the CPU,
    a 512-token prompt: 17 MB of peak RSS), and every cache hit unpickled and re-interned them."""
    return replace(self, uops=[]) if self.uops else self


def kernel_name(ast: UOp) -> str:
  """r_ for kernels with a reduction, E_ for elementwise, then loop sizes, then a hash of the AST so that
  different kernels never share a symbol name."""
  nodes = ast.toposort()
  ranges = sorted((n for n in nodes if n.op is Ops.RANGE), key=lambda r: r.arg[0])
  prefix = "r" if any(n.op is Ops.REDUCE for n in nodes) else "E"
  sizes = "_".join(str(r.src[0].arg) if r.src[0].op is Ops.CONST else "n" for r in ranges) or "1"
  digest = hashlib.sha256(stable_key(nodes).encode()).hexdigest()[:6]
  return f"{prefix}_{sizes}_{digest}"


def stable_key(nodes: list[UOp]) -> str:
  """A toposorted graph as text, the same in every process (UOps hash by identity, which is not)."""
  ids = {n: i for i, n in enumerate(nodes)}
  return ";".join(f"{n.op.name},{n.dtype!r},{[ids[s] for s in n.src]},{n.arg!r}" for n in nodes)


def lower_kernel(ast: UOp, renderer: Renderer) -> list[UOp]:
  """The kernel AST as a linearized program for `renderer`."""
  return lower_kernel_with_dims(ast, renderer)[0]


def default_opts(ast: UOp, renderer: Renderer) -> list[Opt]:
  """NOOPT: none; a matmul on tensor cores (codegen/tensor_core.py); else the hand-coded heuristics. (A BEAM search,
  which times candidates on the device, is the engine's: engine/search.py; its result comes here as `opts`.)"""
  if ast.op is Ops.PROGRAM: return []
  if is_hand_written(ast): return list(ast.arg.opts_to_apply)  # a hand-written kernel: only the opts it asks for
  if NOOPT: return []
  if (tc := tc_opts(ast, renderer)) is not None: return tc
  if renderer.has_local and GROUP_REDUCE.value and (rows := gpu_row_opts(ast)): return rows
  opts = hand_coded_opts(ast, renderer.threads if worth_threading(ast) else 1, wide_loads=renderer.supports_float4, gpu=renderer.has_local,
                         accumulators=renderer.accumulators, early_loads=EARLY_LOADS.value if renderer.grid_wait else 0,
                         resident_threads=resident_threads(renderer.compute_units))
  return opts + row_loop_opts(ast)


def lower_kernel_with_dims(ast: UOp, renderer: Renderer, opts: list[Opt] | None = None) -> tuple[list[UOp], tuple, tuple]:
  """The linearized program and its launch dims (global_size, local_size; entries may be symbolic).
  `opts` None: `default_opts`."""
  if VERIFY: verify_kernel(ast, "kernel AST")
  global_size, local_size = (1, 1, 1), (1, 1, 1)
  if opts is None: opts = default_opts(ast, renderer)
  ast = apply_opts(ast, opts)
  if VERIFY: verify_kernel(ast, "optimizations")
  if (tc := next((o for o in opts if o.op is OptOps.TC), None)) is not None:
    sink, global_size, local_size = lower_tensor_core(ast, renderer, tc.axis, tc.amount)
    sink = cleanup(sink)
    # smem-operand tensor cores (wgmma): the epilogue's neighbouring columns stored (and bias read) as pairs
    if renderer.supports_float4 and renderer.tensor_cores[tc.axis].smem_operands: sink = vectorize_memory(sink, renderer.vector_dtypes, PAIRS)
    if renderer.extra_matcher is not None: sink = graph_rewrite(sink, renderer.extra_matcher, renderer)
    uops = linearize(sink)
    if VERIFY: verify_linear(uops)
    return uops, global_size, local_size
  if any(o.op is OptOps.GROUP for o in opts) and not renderer.has_local:
    raise KernelOptError(f"GROUP shares a reduction between the threads of a block: {renderer.name} has no blocks (has_local)")
  if is_hand_written(ast): ast, global_size, local_size = lower_hand_ranges(ast, renderer)
  elif renderer.has_local:
    max_local = min(DEFAULT_LOCAL, (renderer.local_max or (DEFAULT_LOCAL,))[0])
    if any(o.op is OptOps.GROUP for o in opts): ast, global_size, local_size = lower_groups(ast, max_local, renderer.shared_max, renderer.shuffle_lanes)
    else: ast, global_size, local_size = to_thread_indices(ast, max_local)
  elif (thread := next((o for o in opts if o.op is OptOps.THREAD), None)) is not None and thread.amount > 1:
    ast, used = split_for_threads(ast, thread.amount, thread.axis)
    global_size = (used, 1, 1)
  # a sum of unrolled sums (or of byte dot products' lanes): one horizontal sum per output, not per block
  if not renderer.has_local: ast = keep_lanes(byte_dots(ast, renderer.dot_products))
  # indices simplified under their gates only in kernels with a reduction, where a load runs once per step of a loop (a
  # convolution's); an elementwise kernel's gated loads (a stack of crops) ran slower simplified: LLVM stopped vectorizing
  # dataaug.py's crops kernel (59 -> 120 us), and the pass's compile time is not repaid there
  gated = any(u.op is Ops.REDUCE for u in ast.toposort())
  sink = lower_reduces(ast)
  sink = close_loops(sink)
  sink = cleanup(sink, gated)
  if renderer.supports_float4: sink = vectorize_memory(sink, renderer.vector_dtypes)
  if renderer.extra_matcher is not None: sink = graph_rewrite(sink, renderer.extra_matcher, renderer)
  if renderer.prefetch_ahead: sink = mark_prefetches(sink, renderer.prefetch_ahead)
  if renderer.grid_wait: sink = early_loads(sink, renderer.compute_units)
  uops = linearize(sink)
  if VERIFY: verify_linear(uops)
  return uops, global_size, local_size


def loop_iterations(ast: UOp) -> int:
  """Loop iterations a kernel runs: each reduction's loop counts times the loops it runs inside, each store's once per output.
  Sibling loops add up: a row kernel's three reductions over a 10-wide row followed by its 10 outputs run 40 iterations a row,
  not 10**4 (the product of all its ranges, which once gave a 640-iteration softmax gradient two threads)."""
  def size(r: UOp) -> int: return r.src[0].arg if r.src[0].op is Ops.CONST else 1024
  work = 0
  for n in ast.toposort():
    if n.op is Ops.REDUCE:
      inner = {r for x in n.src[0].toposort() if x.op is Ops.REDUCE for r in x.src[1:]}  # loops closed below this one
      work += prod(size(r) for r in {x for x in n.toposort() if x.op is Ops.RANGE} - inner)
    elif n.op is Ops.STORE: work += prod(size(r) for r in n.src[0].toposort() if r.op is Ops.RANGE)
  return work


def worth_threading(ast: UOp, min_work: int = 1 << 16) -> bool:
  """Threads cost tens of microseconds to start: only kernels with enough loop iterations get them."""
  return loop_iterations(ast) >= min_work


def estimate(uops: list[UOp]) -> tuple[int, int]:
  """(arithmetic ops, bytes moved) from the loop trip counts of the linearized program."""
  ops = mem = 0
  mult, stack = 1, []
  for u in uops:
    if u.op is Ops.RANGE:
      size = u.src[0].arg if u.src[0].op is Ops.CONST else 1
      stack.append(size)
      mult *= size
    elif u.op is Ops.END and stack: mult //= max(stack.pop(), 1)
    elif u.op in (Ops.LOAD, Ops.STORE) and u.src[0].src[0].op is Ops.DEFINE_GLOBAL: mem += mult * u.src[0].dtype.nbytes
    elif u.op is Ops.WMMA: ops += mult * 2 * prod(u.arg[1]) // 32  # one warp's multiply-adds, counted per lane
    elif u.op not in (Ops.CONST, Ops.INDEX, Ops.DEFINE_GLOBAL, Ops.DEFINE_REG, Ops.DEFINE_LOCAL, Ops.DEFINE_VAR, Ops.AFTER, Ops.SINK, Ops.LOAD,
                      Ops.STORE, Ops.RANGE, Ops.END): ops += mult
  return ops, mem


def program_spec(prog: UOp, renderer: Renderer) -> ProgramSpec:
  """A PROGRAM handed in (uop/dsl.py `program`): its source or binary as it is, every buffer a parameter."""
  info = prog.arg
  src = next((s.arg for s in prog.src if s.op is Ops.SOURCE), "")
  lib = next((s.arg for s in prog.src if s.op is Ops.BINARY), None)
  if info.n_params is None: raise ValueError(f"program {info.name}: the number of its buffer parameters is unknown (custom_kernel sets it)")
  if DEBUG >= 4 and src: print(src)
  params = list(range(info.n_params))
  return ProgramSpec(info.name, src, renderer.device, [], params, params, [], info.global_size, info.local_size, lib=lib)


def get_program(ast: UOp, renderer: Renderer, opts: list[Opt] | None = None) -> ProgramSpec:
  if ast.op is Ops.PROGRAM: return program_spec(ast, renderer)
  name = kernel_name(ast)
  # a hand-written kernel keeps its name, with the AST's hash: never a C keyword, never two kernels under one symbol
  if is_hand_written(ast) and ast.arg.name: name = f"{ast.arg.name}_{name.rsplit('_', 1)[1]}"
  if opts is None: opts = default_opts(ast, renderer)
  uops, global_size, local_size = lower_kernel_with_dims(ast, renderer, opts)
  for u in uops:  # one check for every renderer: the dtypes it adds atomically (Renderer.atomic_add)
    if u.op is Ops.STORE and u.arg == STORE_ADD: renderer.check_atomic_add(u)
  src = renderer.render(name, uops)
  if DEBUG >= 4: print(src)
  globals_ = sorted(u.arg for u in uops if u.op is Ops.DEFINE_GLOBAL)
  outs = sorted({u.src[0].src[0].arg for u in uops if u.op is Ops.STORE and u.src[0].src[0].op is Ops.DEFINE_GLOBAL})
  vars_ = [u for u in uops if u.op is Ops.DEFINE_VAR]
  ops, mem = estimate(uops)
  # every thread/block runs the program once
  launches = prod(x if isinstance(x, int) else 1 for x in (*global_size, *local_size))
  ops, mem = ops * launches, mem * launches
  return ProgramSpec(name, src, renderer.device, uops, globals_, outs, vars_, global_size, local_size, ops, mem, list(opts))


def prod_shape(shape: tuple[int, ...]) -> int: return prod(shape)
