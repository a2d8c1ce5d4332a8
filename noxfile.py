"""The test matrix. `uv run nox` runs the default sessions (what CI runs); `uv run nox -l` lists them all.

Sessions run inside the uv workspace environment (`uv sync` installs everything), so they start instantly;
each sets DEV for one device/renderer. The core suite is the same for every DEV.
"""
import os

import nox

nox.options.default_venv_backend = "none"
nox.options.sessions = ["lint", "typecheck", "python", "clang", "llvm", "null", "backend_cpu", "parity", "null_cuda", "backend_nv", "amd", "llm",
                        "distributed", "qcom"]

CORE_TESTS = "packages/core/tests"
# The CLANG renderer's tests use the C compiler the README promises (the ziglang wheel), never one installed by hand:
# a system clang on the CI machine once hid that `zig cc` rejected our -march names. `python` is the session's own.
BUNDLED_CC = {"CC": "python -m ziglang cc"}
DIST_TESTS = "packages/core/tests/distributed"  # multi-process jobs: they run once, in `distributed`, not under every DEV


def _pytest(session: nox.Session, *args: str, dev: str, **env: str) -> None:
  session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--ignore", DIST_TESTS, *args, *session.posargs,
              env={"DEV": dev, **BUNDLED_CC, **env})


@nox.session
def lint(session: nox.Session) -> None:
  """ruff over everything."""
  session.run("ruff", "check", "packages", "examples", "bench", "noxfile.py")


# one mypy run over every package, so that the backends and llm are checked against core's real types: no package ships a
# py.typed marker, so mypy reads none of the installed ones, and a package checked alone saw every `tinygrad` import as Any.
# pyproject.toml's [tool.mypy] puts every package's src/ on mypy_path with explicit package bases: llm's tinygrad/llm (no
# tinygrad/__init__.py of its own) is then tinygrad.llm beside core's tinygrad. One run also parses core once (~10 s cold)
TYPECHECK_PATHS = ("packages/core/src/tinygrad", "packages/backend-cpu/src", "packages/backend-nv/src", "packages/backend-amd/src",
                   "packages/backend-qcom/src", "packages/llm/src/tinygrad/llm")


@nox.session
def typecheck(session: nox.Session) -> None:
  """mypy over every package (TYPECHECK_PATHS) in one run: core, backend-cpu, backend-nv, backend-amd, backend-qcom and llm,
  each against the others' real types."""
  session.run("mypy", *TYPECHECK_PATHS)


@nox.session
def python(session: nox.Session) -> None:
  """The core suite on the PYTHON device (the UOp interpreter: the definition of every op)."""
  _pytest(session, CORE_TESTS, dev="PYTHON")


# files whose kernels test nothing of a renderer (doc examples, multi-device placement, state files, rewrite rules, VIZ): the
# python and llvm sessions run them; clang (zig cc: ~0.2 s a kernel) leaves them to clang_full. About 200 of the suite's 750
# worker-seconds on CLANG, measured cold on 2 cores
CLANG_SKIPS = ("test_docs", "test_multi", "test_data_parallel", "test_viz", "test_state", "test_state_fuzz", "test_rewrite")


@nox.session
def clang(session: nox.Session) -> None:
  """The core suite on CPU with C compiled by clang, less the renderer-independent files (CLANG_SKIPS; all: clang_full)."""
  _pytest(session, CORE_TESTS, *(a for f in CLANG_SKIPS for a in ("--ignore", f"{CORE_TESTS}/{f}.py")), dev="CPU:CLANG")


@nox.session(default=False)
def clang_full(session: nox.Session) -> None:
  """The whole core suite on CPU with C compiled by clang."""
  _pytest(session, CORE_TESTS, dev="CPU:CLANG")


@nox.session
def llvm(session: nox.Session) -> None:
  """The core suite on CPU with LLVM IR compiled by llvmlite."""
  _pytest(session, CORE_TESTS, dev="CPU:LLVM")


@nox.session
def null(session: nox.Session) -> None:
  """Compile-only: the suite's tensor programs compiled on the NULL device (nothing runs), with the LLVM renderer. The CLANG
  renderer's output is compiled and run by the `clang` session already; `null_clang` (not default) repeats this with it."""
  _pytest(session, CORE_TESTS, "-m", "compile_only", dev="NULL:LLVM")


@nox.session(default=False)
def null_clang(session: nox.Session) -> None:
  """The compile-only suite on NULL with the CLANG renderer (left out of CI for time: about a minute on 2 cores)."""
  _pytest(session, CORE_TESTS, "-m", "compile_only", dev="NULL:CLANG")


@nox.session
def backend_cpu(session: nox.Session) -> None:
  """backend-cpu's own tests (renderers, runtime) and the out-of-tree plugin example."""
  _pytest(session, "packages/backend-cpu/tests", "examples/plugin-example/tests", dev="CPU")


@nox.session
def null_cuda(session: nox.Session) -> None:
  """Compile-only for NVIDIA without a GPU: the suite's programs as CUDA C (NVRTC -> sm_90 cubin) and as our PTX
  (nvJitLink -> sm_80 cubin), from the cuda-bindings / nvidia-cuda-nvrtc / nvidia-nvjitlink wheels."""
  for dev in ("NULL:CUDA:sm_90", "NULL:PTX:sm_80"):
    _pytest(session, CORE_TESTS, "-m", "compile_only", dev=dev)


# The H200 machine's NVRTC (13.0, whose ptxas serialized or reordered wgmma code that 13.5 doesn't) and nvdisasm, from PyPI
# into .nox/tools: test_nv_tma.py compiles the tensor-core kernels with that NVRTC and reads their SASS; test_dependents.py reads
# the SASS of the moved launch trigger
NV_TOOLS = ("nvidia-cuda-nvrtc==13.0.88", "nvidia-cuda-nvdisasm==13.5.37")


@nox.session
def backend_nv(session: nox.Session) -> None:
  """backend-nv's own tests: registrations, renderer output, and every op of both renderers compiled for the GPU
  (and run against alu where a GPU is present; the GPU-only runtime tests skip without one); the ptxas 13.0 checks with
  NV_TOOLS."""
  tools = os.path.abspath(".nox/tools/nv")
  lib, disasm = f"{tools}/nvidia/cu13/lib/libnvrtc.so.13", f"{tools}/nvidia/cu13/bin/nvdisasm"
  if not (os.path.exists(lib) and os.path.exists(disasm)):
    session.run("uv", "pip", "install", "-q", "--no-deps", "--target", tools, *NV_TOOLS, external=True)
  _pytest(session, "packages/backend-nv/tests", dev="CUDA", NVRTC_SERIAL_CHECK_LIB=lib, NVDISASM=disasm)


# the core suite's programs compiled for AMD in the default session (a subset: HIP's clang runs once per kernel)
AMD_CORE_SUBSET = ("packages/core/tests/test_programs.py", "packages/core/tests/test_group_reduce.py")


@nox.session
def amd(session: nox.Session) -> None:
  """backend-amd without a GPU: its own tests (DEV strings, code objects of both renderers for every arch, every WMMA/MFMA
  shape rendered by both and emulated on PYTHON::gfx1100/gfx1201/gfx942/gfx950, the float64 math sequences on the host, the
  KFD runtime on MOCKKFD with both renderers: AQL and SDMA packet checks, events, Tensor programs run from their packets),
  then a subset of the core suite compiled
  as our LLVM IR (llvmlite + ziglang's ld.lld) for gfx942 and as HIP C (Debian clang-22, installed by .ci/run) for gfx1100."""
  _pytest(session, "packages/backend-amd/tests", "-m", "not slow", dev="PYTHON")  # slow: mocks of other archs, in amd_mock
  for dev in ("MOCKKFD+AMD", "MOCKKFD+AMD:LLVM:gfx942"):  # fp8 conversions run by both renderers' kernels, all 256 patterns
    # nine tests of a few seconds: one process, no xdist workers to start
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", f"{CORE_TESTS}/test_fp8.py", *session.posargs, env={"DEV": dev, **BUNDLED_CC})
  for dev in ("NULL:LLVM:gfx942", "NULL:HIP:gfx1100"):
    _pytest(session, *AMD_CORE_SUBSET, "-m", "compile_only", dev=dev)


@nox.session(default=False)
def amd_full(session: nox.Session) -> None:
  """The whole core suite compiled for AMD by both renderers and three archs (6 runs of 1.5-3 minutes on 2 busy cores)."""
  for dev in ("NULL:HIP:gfx1100", "NULL:HIP:gfx942", "NULL:HIP:gfx950", "NULL:LLVM:gfx1100", "NULL:LLVM:gfx942", "NULL:LLVM:gfx950"):
    _pytest(session, CORE_TESTS, "-m", "compile_only", dev=dev)


# MOCKKFD+AMD runs every kernel's uops in the PYTHON interpreter after clang compiled it, so the whole core suite (about
# 3600 tests) takes hours on 2 cores. amd_mock runs the part that exercises the runtime most: the kernel catalog, TinyJit
# graphs with patched kernargs, GPU-style and grouped reductions, tensor cores in wave32, custom kernels, BEAM (with compile
# workers), the API suites of elementwise, movement, reduce, dtype and autograd ops, nn/optim/training, state, multi-device
# on the mock's four GPUs (about 1600 tests; 10-15 minutes on 2 busy cores)
AMD_MOCK_SUBSET = [f"{CORE_TESTS}/{f}.py" for f in ("test_programs", "test_jit", "test_gpu_reduce", "test_group_reduce", "test_tensor_cores",
                                                     "test_custom_kernel", "test_creation", "test_function", "test_reduce_api",
                                                     "test_elementwise_api", "test_movement_api", "test_dtype", "test_autograd", "test_nn",
                                                     "test_optim", "test_training", "test_tensor_errors", "test_state", "test_tinygrad_api",
                                                     "test_opt_actions", "test_multi", "test_data_parallel")]


@nox.session(default=False)
def amd_mock(session: nox.Session) -> None:
  """A subset of the core suite (AMD_MOCK_SUBSET) on DEV=MOCKKFD+AMD: the KFD runtime on the mock KFD, each dispatch's packet
  checked and its kernel run by the PYTHON interpreter on the mock's memory (HIP C through Debian clang-22); then the
  backend-amd tests marked slow (int8/fp8 MFMA and RDNA4 fp8 WMMA on mocks of gfx942/gfx950/gfx1201, each in its own process)."""
  _pytest(session, *AMD_MOCK_SUBSET, dev="MOCKKFD+AMD")
  _pytest(session, "packages/backend-amd/tests", "-m", "slow", dev="PYTHON")


@nox.session(default=False)
def nv_mock(session: nox.Session) -> None:
  """The same subset of the core suite (AMD_MOCK_SUBSET) on DEV=MOCK+NV: the NVK+NV runtime (RM objects, UVM-mapped memory,
  GPFIFO channel, QMD launches, copy engine) on the mock driver, each launch's methods and QMD checked and its kernel run by
  the PYTHON interpreter on the mock's memory (CUDA C through NVRTC; four mock sm_90 GPUs; 1592 tests, about 2-4 minutes on
  2 cores). Left out: the custom kernel
  written as CUDA C by hand (no uops: the mock can't know what it computes, and says so)."""
  _pytest(session, *AMD_MOCK_SUBSET, "--deselect", f"{CORE_TESTS}/test_custom_kernel.py::test_cuda_source_kernel_compiles_through_custom_kernel",
          dev="MOCK+NV")


# backend-qcom in CI: OpenCL on the CPU (PoCL, from the pocl-binary-distribution wheel) runs the QCOMCL kernels. PoCL compiles
# each kernel with LLVM (about 0.3 s of CPU each, cold), so the default session runs a representative part of the core suite
# there (measured cold: about 65 s of CPU for the package's tests, 65 s for this subset); qcom_full runs all of it
QCOM_CORE_SUBSET = [f"{CORE_TESTS}/{f}.py" for f in ("test_programs", "test_gpu_reduce", "test_jit")]
# Adreno archs compute half natively (cl_khr_fp16), which PoCL lacks: their half kernels can't be compiled here; and Adreno
# has no double (QCOMCL says so: UnsupportedDTypeError), so those programs are left out too
QCOM_NO_HALF = ["-k", "not half and not float16 and not fp16 and not double and not float64"]


@nox.session
def qcom(session: nox.Session) -> None:
  """backend-qcom: its own tests (registrations, OpenCL C per arch, every op against PYTHON on the CL device, PM4 packets and
  the kgsl mock), part of the core suite on DEV=CL:QCOMCL (PoCL) and on DEV=MOCKKGSL+QCOM (the kgsl runtime on its mock), and
  the catalog's programs compiled for an Adreno a630 with the pitch option."""
  _pytest(session, "packages/backend-qcom/tests", *QCOM_CORE_SUBSET, dev="CL:QCOMCL")
  _pytest(session, f"{CORE_TESTS}/test_programs.py", "-m", "compile_only", *QCOM_NO_HALF, dev="NULL:QCOMCL:a630,IMAGE_PITCH_ALIGNMENT=64")
  # the kgsl runtime on its mock: the same subset, every kernel dispatched through PM4 packets the mock checks and executes
  # (its float kernels are the CL run's sources, so PoCL's compiles come from the cache: about 25 s)
  _pytest(session, *QCOM_CORE_SUBSET, *QCOM_NO_HALF, dev="MOCKKGSL+QCOM")


@nox.session(default=False)
def qcom_full(session: nox.Session) -> None:
  """The whole core suite on DEV=CL:QCOMCL (PoCL), and every compile_only test compiled for a630 (its half kernels excepted:
  see QCOM_NO_HALF); then the qcom session's core subset with images, IMAGE=1 and IMAGE=2 (image2d_t reads and writes:
  about 75 s of CPU each, cold, so not in the default session; the package's own image tests are). Not a default session:
  PoCL compiles each kernel with LLVM; the suite took 19 CPU-minutes (33 minutes on a busy 2-core machine, 2026-12-01, with
  LLVM's optimizer still on)."""
  _pytest(session, CORE_TESTS, dev="CL:QCOMCL")
  _pytest(session, CORE_TESTS, "-m", "compile_only", *QCOM_NO_HALF, dev="NULL:QCOMCL:a630,IMAGE_PITCH_ALIGNMENT=64")
  for image in ("1", "2"): _pytest(session, *QCOM_CORE_SUBSET, dev="CL:QCOMCL", IMAGE=image)


# the kgsl runtime's suite on its mock: the catalog, the JIT (device graphs), GPU reductions, and the elementwise, reduce,
# movement, autograd, nn and dtype APIs
QCOM_MOCK_FILES = [f"{CORE_TESTS}/{f}.py" for f in ("test_programs", "test_jit", "test_gpu_reduce", "test_elementwise_api", "test_reduce_api",
                                                   "test_movement_api", "test_autograd", "test_nn", "test_dtype")]


@nox.session(default=False)
def qcom_mock(session: nox.Session) -> None:
  """A larger part of the core suite (QCOM_MOCK_FILES) on the kgsl runtime over its mock, every dtype included: the QCOM device
  with the generic arch cl_fp64 (half stored as 16 bits, double native), which PoCL, the mock's executor, can compile; the
  default session's a630 run leaves half and double out. Not a default session: PoCL compiles each kernel (minutes)."""
  _pytest(session, *QCOM_MOCK_FILES, dev="MOCKKGSL+QCOM::cl_fp64")


PARITY = "packages/core/tests/parity"
PARITY_CLANG_FILES = ("test_parity_elementwise.py", "test_parity_reduce.py", "test_parity_special.py")


@nox.session(venv_backend="venv")
def parity(session: nox.Session) -> None:
  """The torch parity suite on PYTHON and CPU:LLVM, its arithmetic files on CPU:CLANG. torch (2.13.0, CPU build) comes from pip, which finds
  the CPU wheel locally; uv would download a multi-GB CUDA build instead, so this session has its own venv."""
  session.install("torch==2.13.0")
  session.install("-e", "packages/core", "-e", "packages/backend-cpu", "pytest", "pytest-xdist", "numpy", "ziglang")
  for dev in ("PYTHON", "CPU:LLVM", "CPU:CLANG"):
    # CLANG (zig cc: the slowest to compile, ~0.2 s a kernel) runs the files whose results depend on the renderer's arithmetic
    # (casts, division, nan and inf, transcendentals); the fuzzer, nn, movement and state programs run on PYTHON and LLVM
    # (on CLANG: `parity_clang_full`). Measured cold on 2 cores: CLANG's whole suite without the fuzzer 299 s, nn alone 205 s
    files = [f"{PARITY}/{f}" for f in PARITY_CLANG_FILES] if dev == "CPU:CLANG" else [PARITY]
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", *files, *session.posargs, env={"DEV": dev, **BUNDLED_CC})


@nox.session(venv_backend="venv", default=False)
def parity_clang_full(session: nox.Session) -> None:
  """The whole torch parity suite on CPU:CLANG, the fuzzer included (the default `parity` session runs part of it there)."""
  session.install("torch==2.13.0")
  session.install("-e", "packages/core", "-e", "packages/backend-cpu", "pytest", "pytest-xdist", "numpy", "ziglang")
  session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", PARITY, *session.posargs, env={"DEV": "CPU:CLANG", **BUNDLED_CC})


@nox.session(venv_backend="venv", default=False)
def bench(session: nox.Session) -> None:
  """The benchmarks (bench/run_all.py): our figures next to numpy, torch and tinygrad 0.14.0. Not a default session:
  it takes minutes and its numbers depend on the machine's load. `uv run nox -s bench -- matmul sum` runs some.
  Its own venv, like `parity`, so that torch is the CPU build from pip; tinygrad 0.14.0 runs in an isolated uv env."""
  session.install("torch==2.13.0")
  session.install("-e", "packages/core", "-e", "packages/backend-cpu", "numpy")
  session.run("python", "bench/run_all.py", *session.posargs)


@nox.session
def distributed(session: nox.Session) -> None:
  """tinygrad.distributed on the CPU: 2- and 3-process MPI jobs (mpiexec from the mpich wheel) run every collective
  against numpy and the data-parallel example against one process; the TCP store and the launcher; the NCCL ctypes
  layer without a GPU. Real NCCL runs: packages/core/tests/distributed/run_on_gpus.sh on a machine with 2 GPUs."""
  session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", DIST_TESTS, "packages/backend-nv/tests/test_nccl.py",
              *session.posargs, env={"DEV": "CPU"})


@nox.session
def llm(session: nox.Session) -> None:
  """tinygrad.llm: GGUF, dequantization, tokenizers, models against numpy, CLI, server (openai client), chat page."""
  _pytest(session, "packages/llm/tests", "-m", "not slow", dev="CPU")
