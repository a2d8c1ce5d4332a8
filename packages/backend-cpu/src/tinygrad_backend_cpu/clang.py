"""The CLANG renderer for the CPU device: C source -> relocatable ELF object, loaded in-process by runtime.CPUProgram.

The object must need nothing beyond libm (MCJIT links it into this process; there is no libgcc/compiler-rt), so
half/bf16 conversions the compiler would call out for are defined in the kernel source itself (weak, see _SOFTFLOAT).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

from tinygrad.device.plugin import (
  CompileError,
  Compiler,
  CStyleRenderer,
  DType,
  Target,
  UnsupportedDTypeError,
  dtypes,
  pm_fast_transcendentals,
  pm_fp8_as_bytes,
)

from tinygrad_backend_cpu.threadpool import cpu_threads

_CLANG_NAMES = ("clang", *(f"clang-{v}" for v in range(22, 13, -1)))
_FEATURE_RE = re.compile(r"[+-]?[A-Za-z0-9_.-]+")
_INSTALL_HINT = "apt-get install clang-19, or pip install ziglang (it bundles clang), or set CC"
# flags so the object is self-contained and its floating point matches alu.py: no FMA contraction, no errno
# (so sqrt is an instruction), signed overflow wraps (-fwrapv), no stack protector/builtin libcalls/sanitizers
BASE_FLAGS = ("-c", "-x", "c", "-O2", "-fPIC", "-ffp-contract=off", "-fno-math-errno", "-fwrapv", "-fno-stack-protector",
              "-fno-builtin", "-fno-sanitize=all")


def _zig_binary() -> str | None:
  """The zig executable the ziglang package ships (what `python -m ziglang` execs), or None without the package."""
  if (spec := importlib.util.find_spec("ziglang")) is None or not spec.submodule_search_locations: return None
  path = os.path.join(list(spec.submodule_search_locations)[0], "zig")
  return path if os.access(path, os.X_OK) else None


def _direct(argv: list[str]) -> list[str]:
  """`python -m ziglang cc ...` -> `<ziglang>/zig cc ...`: the same compiler without a Python interpreter starting for each
  kernel (46 small kernels on a 2-core machine: 12.0 -> 7.8 s)."""
  if len(argv) >= 3 and argv[1:3] == ["-m", "ziglang"] and os.path.basename(argv[0]).startswith("python") and (zig := _zig_binary()):
    return [zig, *argv[3:]]
  return argv


def find_c_compiler() -> list[str] | None:
  """The C compiler command: $CC, clang, clang-22 .. clang-14 on PATH, then the ziglang package's `zig cc`."""
  if (cc := os.environ.get("CC", "").strip()):
    argv = shlex.split(cc)
    if (path := shutil.which(argv[0])) is not None: return _direct([path, *argv[1:]])
  for name in _CLANG_NAMES:
    if (path := shutil.which(name)) is not None: return [path]
  if (zig := _zig_binary()) is not None: return [zig, "cc"]
  if importlib.util.find_spec("ziglang") is not None: return [sys.executable, "-m", "ziglang", "cc"]
  return None


@functools.cache
def compiler_version(cc: tuple[str, ...]) -> str:
  """First line of `cc --version`; raises RuntimeError when the compiler doesn't run."""
  try: out = subprocess.run([*cc, "--version"], capture_output=True, text=True, timeout=120)
  except (OSError, subprocess.TimeoutExpired) as e: raise RuntimeError(f"C compiler {' '.join(cc)} failed to run: {e}") from e
  if out.returncode != 0: raise RuntimeError(f"C compiler {' '.join(cc)} --version failed: {out.stderr.strip()}")
  return (out.stdout.strip().splitlines() or ["unknown version"])[0]


def clang_available() -> str | None:
  """None when a usable C compiler is found, else a sentence saying why not and how to fix it."""
  if (cc := find_c_compiler()) is None:
    bad_cc = f" ($CC={os.environ['CC']!r} is not on PATH)" if os.environ.get("CC", "").strip() else ""
    return f"no C compiler found{bad_cc}: {_INSTALL_HINT}"
  try: compiler_version(tuple(cc))
  except RuntimeError as e: return f"{e}: {_INSTALL_HINT}"
  return None


def is_zig(cc: list[str] | tuple[str, ...]) -> bool:
  """Whether `cc` is zig's clang driver (`python -m ziglang cc`, or `zig cc` from $CC)."""
  return "ziglang" in cc or any(os.path.basename(a) in ("zig", "zig.exe") for a in cc[:2])


def march_flag(cc: list[str] | tuple[str, ...], arch: str) -> str:
  """-march for this compiler. LLVM names CPUs with hyphens (x86-64-v3, skylake-avx512, cortex-a72); zig cc takes
  the same CPUs only with underscores (x86_64_v3) and rejects the hyphenated names."""
  return f"-march={arch.replace('-', '_') if is_zig(cc) else arch}"


def feature_flags(opts: tuple[str, ...]) -> list[str]:
  """DEV arch options to clang flags: '+avx2' or 'avx2' -> -mavx2, '-avx512f' -> -mno-avx512f."""
  flags = []
  for o in opts:
    if not _FEATURE_RE.fullmatch(o): raise ValueError(f"bad CPU feature option {o!r}: expected +name or -name, e.g. +avx2")
    flags.append(f"-mno-{o[1:]}" if o.startswith("-") else f"-m{o.lstrip('+')}")
  return flags


def _host_cpu() -> str:
  # -march=native depends on the machine, so a binary cached on one CPU must not be reused on another
  # (LLVM's view of the host, kept in the disk cache by llvmir.host_info: no llvmlite import once it is known)
  try:
    from tinygrad_backend_cpu.llvmir import host_info
    host = host_info()
    return f"{host.cpu}:{hashlib.sha256(host.features.encode()).hexdigest()[:16]}"
  except Exception:  # noqa: BLE001  llvmlite missing or too old: fall back to coarser info
    return f"{platform.machine()}:{platform.processor()}"


def _accumulators(arch: str, opts: tuple[str, ...]) -> int:
  """The register block's budget (llvmir.accumulator_budget) for the host's features plus opts; for another arch, AVX2's."""
  try:
    from tinygrad_backend_cpu.llvmir import accumulator_budget, host_info
    host = host_info()
    if arch != "native": return accumulator_budget("+avx", host.triple)
    return accumulator_budget(",".join([host.features, *(o if o[0] in "+-" else "+" + o for o in opts)]), host.triple)
  except Exception:  # noqa: BLE001  llvmlite missing: what 16 AVX registers hold
    return 96


class ClangCompiler(Compiler):
  """C source (stdin) -> relocatable ELF object bytes, with clang (or zig cc)."""

  def __init__(self, arch: str = "native", opts: tuple[str, ...] = (), cc: list[str] | None = None):
    self.arch, self.opts = arch or "native", tuple(opts)
    self._features = feature_flags(self.opts)  # validates the options now
    self._cc = cc

  @functools.cached_property
  def flags(self) -> list[str]:
    # the DEV options come last so that e.g. '+avx512bf16' turns an instruction set that exact_bf16_flags removed back on
    return [*BASE_FLAGS, march_flag(self.cc, self.arch), *exact_bf16_flags(tuple(self.cc)), *self._features]

  @property
  def cc(self) -> list[str]:
    if self._cc is None:
      if (found := find_c_compiler()) is None: raise RuntimeError(f"no C compiler found: {_INSTALL_HINT}")
      self._cc = found
    return self._cc

  @property
  def cachekey(self) -> str:  # type: ignore[override]
    native = f":{_host_cpu()}" if self.arch == "native" else ""
    # the compiler by name and version, not by path: the same zig in another venv (CI's parity session) or checkout shares binaries
    name = " ".join([os.path.basename(self.cc[0]), *self.cc[1:]])
    return f"compile_clang:{name}:{compiler_version(tuple(self.cc))}:{' '.join(self.flags)}{native}"

  def describe(self) -> str: return f"{' '.join(self.cc)} ({compiler_version(tuple(self.cc))})"

  def compile(self, src: str) -> bytes:
    fd, out_path = tempfile.mkstemp(suffix=".o", prefix="tinygrad_clang_")
    os.close(fd)
    try:
      try: res = subprocess.run([*self.cc, *self.flags, "-o", out_path, "-"], input=src.encode(), capture_output=True, timeout=600)
      except (OSError, subprocess.TimeoutExpired) as e: raise CompileError(" ".join(self.cc), src, str(e)) from e
      if res.returncode != 0: raise CompileError(self.describe(), src, res.stderr.decode(errors="replace"))
      with open(out_path, "rb") as f: return f.read()
    finally:
      with contextlib.suppress(FileNotFoundError): os.unlink(out_path)  # clang removes it itself on failure

  def supports(self, probe: str) -> bool:
    """Whether this compiler (with these flags) compiles the C snippet `probe`; cached per compiler and flags."""
    return self.probe_error(probe) is None

  def probe_error(self, probe: str) -> str | None:
    """None when the C snippet `probe` compiles with these flags, else the compiler's own error."""
    return _probe(tuple(self.cc), tuple(self.flags), probe)

  def disassemble(self, lib: bytes) -> str:
    tool = next((p for n in ("llvm-objdump", *(f"llvm-objdump-{v}" for v in range(22, 13, -1)), "objdump") if (p := shutil.which(n))), None)
    if tool is None: return super().disassemble(lib)
    with tempfile.NamedTemporaryFile(suffix=".o") as f:
      f.write(lib)
      f.flush()
      return subprocess.run([tool, "-d", f.name], capture_output=True, text=True).stdout


@functools.cache
def exact_bf16_flags(cc: tuple[str, ...]) -> tuple[str, ...]:
  """x86's float->bf16 instructions (AVX512-BF16, AVX-NE-CONVERT) flush subnormals to zero, alu.truncate keeps them:
  turn them off (clang then converts in software), as far as this compiler knows the flags."""
  if platform.machine().lower() not in ("x86_64", "amd64"): return ()
  return tuple(f for f in ("-mno-avx512bf16", "-mno-avxneconvert") if _probe(cc, (*BASE_FLAGS, f), "int tg_probe;") is None)


@functools.cache
def _probe(cc: tuple[str, ...], flags: tuple[str, ...], src: str) -> str | None:
  """None when `src` compiles, else the compiler's error (its first lines: enough to tell a missing type from bad flags)."""
  comp = ClangCompiler(cc=list(cc))
  comp.flags = list(flags)
  try: comp.compile(src)
  except CompileError as e:
    lines = e.message.strip().splitlines()
    return "\n".join(([ln for ln in lines if "error" in ln.lower()] or lines)[:4]) or "failed without a message"
  except RuntimeError as e: return str(e)
  return None


# Conversions clang calls out for (to compiler-rt/libgcc) when the CPU lacks native half/bf16 converts, or always for
# double->half. MCJIT can't resolve them, so each object carries its own: weak, so loading many objects is fine.
# double->bf16 rounds through float, as alu.truncate does.
_SOFTFLOAT_HALF = """\
#define TG_WEAK __attribute__((weak, visibility("hidden")))
#define TG_BITS(t, x) ({ union { __typeof__(x) s; t d; } tg_u = { .s = (x) }; tg_u.d; })
TG_WEAK float __extendhfsf2(_Float16 x) {
  unsigned short h = TG_BITS(unsigned short, x);
  unsigned int s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return TG_BITS(float, s | 0x7f800000u | (m << 13));
  if (e != 0) return TG_BITS(float, s | ((e + 112u) << 23) | (m << 13));
  float f = (float)m * 0x1p-24f;
  return s ? -f : f;
}
TG_WEAK _Float16 __truncdfhf2(double x) {
  unsigned long long b = TG_BITS(unsigned long long, x), a = b & 0x7fffffffffffffffull;
  unsigned short s = (unsigned short)((b >> 48) & 0x8000u);
  if (a >= 0x7ff0000000000000ull) return TG_BITS(_Float16, (unsigned short)(s | (a > 0x7ff0000000000000ull ? 0x7e00u : 0x7c00u)));
  int e = (int)(a >> 52) - 1023;
  if (e > 15) return TG_BITS(_Float16, (unsigned short)(s | 0x7c00u));
  if (e < -25) return TG_BITS(_Float16, s);
  unsigned long long m = (a & 0xfffffffffffffull) | 0x10000000000000ull;
  int shift = e >= -14 ? 42 : 28 - e;
  unsigned long long q = m >> shift, rem = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  return TG_BITS(_Float16, (unsigned short)(s | ((e >= -14 ? (unsigned long long)(e + 14) << 10 : 0) + q)));
}
TG_WEAK _Float16 __truncsfhf2(float x) { return __truncdfhf2((double)x); }"""

_SOFTFLOAT_BF16 = """\
#define TG_WEAK_BF __attribute__((weak, visibility("hidden")))
TG_WEAK_BF __bf16 __truncsfbf2(float x) {
  unsigned int u = __builtin_bit_cast(unsigned int, x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __builtin_bit_cast(__bf16, (unsigned short)((u >> 16) | 0x40u));
  u += 0x7fffu + ((u >> 16) & 1u);
  return __builtin_bit_cast(__bf16, (unsigned short)(u >> 16));
}
TG_WEAK_BF __bf16 __truncdfbf2(double x) { return __truncsfbf2((float)x); }"""

_PROBES = {
  dtypes.float16: "_Float16 tg_probe(_Float16 a, _Float16 b, double d) { return a * b + (_Float16)d; }",
  dtypes.bfloat16: "__bf16 tg_probe(__bf16 a, __bf16 b, double d) { return a * b + (__bf16)d; }",
}


class ClangRenderer(CStyleRenderer):
  """C for the CPU: `void name(T0* restrict data0, ..., int var0, ...)`, compiled by ClangCompiler."""
  threads = cpu_threads()
  device = "CPU"
  name = "CLANG"
  # libm's exp2f and log2f are one element per call: as arithmetic, loops vectorize. fp8 is a byte converted in the kernel
  extra_matcher = pm_fast_transcendentals + pm_fp8_as_bytes
  type_map = {**CStyleRenderer.type_map, dtypes.float16: "_Float16", dtypes.bfloat16: "__bf16"}
  # __atomic_fetch_add (floats: a compare-and-swap loop, which gcc compiles too): a kernel's threads may add into one element
  atomic_add = (dtypes.float32, dtypes.float64, *dtypes.ints)
  render_atomic_add = CStyleRenderer.render_atomic_add_portable
  compiler: ClangCompiler

  def __init__(self, target: Target | None = None):
    target = target or Target("CPU", "CLANG")
    self.arch, self.opts = target.arch or "native", tuple(target.opts)
    self.compiler = ClangCompiler(self.arch, self.opts)
    self.accumulators = _accumulators(self.arch, self.opts)

  @property
  def supported_dtypes(self) -> frozenset[DType]:  # type: ignore[override]
    fp8 = {dtypes.fp8e4m3, dtypes.fp8e5m2}  # bytes, see pm_fp8_as_bytes
    return frozenset(dt for dt in dtypes.fields().values() if (dt in self.type_map or dt in fp8) and self._compiler_handles(dt))

  def _compiler_handles(self, dt: DType) -> bool:
    if dt not in _PROBES: return True
    try: return self.compiler.supports(_PROBES[dt])
    except RuntimeError: return True  # no compiler here: rendering alone still works, compiling will say why not

  def render_bitcast(self, x: str, src: DType, dst: DType) -> str:
    # type punning through a union in a statement expression: gcc and clang both take it in C (gcc's C has no
    # __builtin_bit_cast, and a machine without clang may compile our C with gcc: $CC, or a `cc` that is gcc)
    if dst == dtypes.bool: return f"({x}!=0)"  # alu.from_bits: any nonzero byte is true
    s, d = self.render_dtype(src), self.render_dtype(dst)
    return f"({{ union {{ {s} s; {d} d; }} tg_u = {{ .s = ({s}){x} }}; tg_u.d; }})"

  def render_dtype(self, dt: DType) -> str:
    if dt in _PROBES and not self._compiler_handles(dt):
      # show the compiler's own words: a flag it rejects looks the same to the probe as a missing type
      error = self.compiler.probe_error(_PROBES[dt])
      raise UnsupportedDTypeError(self.name, dt, f"{self.compiler.describe()} with flags {' '.join(self.compiler.flags)} failed to compile "
                                  f"arithmetic on {self.type_map[dt]}:\n{error}\nuse clang >= 17 (or pip install ziglang), "
                                  "or check the arch and options in DEV")
    return super().render_dtype(dt)

  def helpers(self) -> list[tuple[str, str]]:
    return [("_Float16", _SOFTFLOAT_HALF), ("__bf16", _SOFTFLOAT_BF16), *super().helpers()]

  def params(self) -> dict:
    return {**super().params(), "opts": self.opts}
