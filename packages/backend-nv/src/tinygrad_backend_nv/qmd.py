"""The QMD (queue meta data): the launch descriptor the compute class reads for each kernel launch (SEND_PCAS_A points at it).

The layouts are data: qmd_fields.py, generated from open-gpu-doc's clc6c0qmd.h (V03_00: Ampere and Ada compute classes) and
clcbc0qmd.h (V04_00: HOPPER_COMPUTE_A; the header also lists V03_00 for Hopper, but NVK and CUDA launch Hopper with V04_00,
which moves almost every field: V03_00 on Hopper is what left tinygrad's launches hanging). `qmd_encode` packs header field
names (indexed ones as "NAME(i)") into bytes, `qmd_decode` unpacks them; `LaunchQMD` is one launch in version-independent
terms, written by `encode_launch` and read back by `decode_launch` (the mock's GPFIFO processor uses the same tables).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tinygrad_backend_nv.qmd_fields import QMD_FIELDS

QMD_BYTES = {"V03_00": 256, "V04_00": 384}  # V03_00 ends at bit 2047, V04_00 at bit 3071 (OUTER_STICKY_OVERFLOW)
QMD_ALIGN = 256  # SEND_PCAS_A takes the address >> 8
MAJOR = {"V03_00": 3, "V04_00": 4}
# field values (the headers' NAME_VALUE defines)
QMD_TYPE_GRID_CTA = 2                # V04_00 QMD_TYPE
RELEASE_STRUCTURE_SIZE_ONE_WORD = 1  # a 32-bit payload, no timestamp
RELEASE_MEMBAR_TYPE_FE_SYSMEMBAR = 1  # the grid's writes are visible system-wide before the release
CWD_MEMBAR_TYPE_L1_SYSMEMBAR = 1     # a system-wide memory barrier when the grid completes
API_VISIBLE_CALL_LIMIT_NO_CHECK = 1
SAMPLER_INDEX_VIA_HEADER_INDEX = 1
# shared memory carve-outs (KB) the SM can be configured with, per arch; the QMD's SM_CONFIG fields encode one as KB / 4 + 1
SMEM_CONFIGS_KB = {90: (8, 16, 32, 64, 100, 132, 164, 196, 228), 80: (8, 16, 32, 64, 100, 132, 164), 86: (8, 16, 32, 64, 100),
                   89: (8, 16, 32, 64, 100), 75: (32, 64)}


def version_for_class(compute_class: int) -> str:
  """The QMD version a compute class launches with: V04_00 from HOPPER_COMPUTE_A (0xcbc0) on, V03_00 for Ampere/Ada."""
  if compute_class >= 0xCBC0: return "V04_00"
  if compute_class >= 0xC6C0: return "V03_00"
  raise ValueError(f"compute class {compute_class:#x} is older than Ampere (0xc6c0): NVK+NV launches Ampere, Ada and Hopper only")


def _table(version: str) -> dict[str, tuple[int, int]]:
  if version not in QMD_FIELDS: raise ValueError(f"unknown QMD version {version!r}: one of {', '.join(QMD_FIELDS)}")
  return QMD_FIELDS[version]


def qmd_encode(version: str, fields: dict[str, int] | None = None, **kw: int) -> bytes:
  """The QMD of `version` with the named fields set (the rest zero). Keyword names may spell an index as a suffix:
  CONSTANT_BUFFER_VALID__0 is CONSTANT_BUFFER_VALID(0)."""
  table, value = _table(version), 0
  allf = dict(fields or {})
  for k, v in kw.items():
    name, _, idx = k.partition("__")
    allf[f"{name}({idx})" if idx else name] = v
  for name, v in allf.items():
    if name not in table: raise KeyError(f"QMD {version} has no field {name!r}")
    hi, lo = table[name]
    if not 0 <= v < 1 << (hi - lo + 1): raise ValueError(f"QMD {version} field {name} is {hi - lo + 1} bits wide ({hi}:{lo}): {v:#x} does not fit")
    value |= v << lo
  return value.to_bytes(QMD_BYTES[version], "little")


def qmd_decode(version: str, data: bytes) -> dict[str, int]:
  """Every field of a QMD (by the header's names)."""
  table = _table(version)
  if len(data) < QMD_BYTES[version]: raise ValueError(f"a QMD {version} is {QMD_BYTES[version]} bytes, got {len(data)}")
  value = int.from_bytes(data[:QMD_BYTES[version]], "little")
  return {name: (value >> lo) & ((1 << (hi - lo + 1)) - 1) for name, (hi, lo) in table.items()}


def smem_config(arch: int, nbytes: int, threads: int = 1024) -> tuple[int, int, int]:
  """(min, max, target) SM_CONFIG_SHARED_MEM_SIZE codes for a block of `threads` threads using `nbytes` of shared memory.
  The SM may run the launch with any carve-out from min to max, so min must hold a block: with min at the smallest (8 KB)
  a block of 17 KB trapped on the H200 (RM error 13, GR exception). The target holds as many blocks as the SM's 2048
  threads allow, when one carve-out can."""
  kbs = SMEM_CONFIGS_KB.get(arch, SMEM_CONFIGS_KB[80])
  need = (nbytes + 1023) // 1024
  fits = [k for k in kbs if k >= need]
  if not fits: raise ValueError(f"a block needs {nbytes} bytes of shared memory; sm_{arch} has at most {kbs[-1]} KB per SM")
  resident = [k for k in kbs if k >= need * max(1, 2048 // max(threads, 1))]
  code = lambda kb: kb // 4 + 1  # noqa: E731
  return code(fits[0]), code(kbs[-1]), code(resident[0] if resident else kbs[-1])


def smem_config_bytes(code: int) -> int:
  """The shared memory (bytes) of an SM configured with SM_CONFIG_SHARED_MEM_SIZE `code`."""
  return (code - 1) * 4 * 1024


@dataclass
class LaunchQMD:
  """One kernel launch, independent of the QMD version."""
  program: int                       # GPU address of the kernel's first instruction
  grid: tuple[int, int, int]
  block: tuple[int, int, int]
  registers: int
  barriers: int
  shared: int                        # bytes of shared memory per block (static + dynamic + the arch's reserved part)
  local_high: int                    # bytes of per-thread local memory at the top of the local window (the stack)
  cbufs: dict[int, tuple[int, int]] = field(default_factory=dict)  # constant buffer index -> (address, size)
  release: tuple[int, int] | None = None  # (address, 32-bit payload) the launch writes when it completes
  arch: int = 90
  sm_config: tuple[int, int, int] = field(default=(0, 0, 0), compare=False)  # decoded (min, max, target) SM_CONFIG_SHARED_MEM_SIZE; encode derives them


def cbuf_address_fields(version: str, i: int, addr: int) -> dict[str, int]:
  """The QMD fields that place constant buffer `i` at `addr`."""
  if version == "V04_00":
    if addr % 64: raise ValueError(f"constant buffer {i} at {addr:#x}: a QMD V04_00 takes 64-byte aligned constant buffers")
    return {f"CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6({i})": (addr >> 6) & 0xFFFFFFFF, f"CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6({i})": addr >> 38}
  return {f"CONSTANT_BUFFER_ADDR_LOWER({i})": addr & 0xFFFFFFFF, f"CONSTANT_BUFFER_ADDR_UPPER({i})": addr >> 32}


def release_fields(version: str, release: tuple[int, int]) -> dict[str, int]:
  """The QMD fields of the semaphore release (address, 32-bit payload) a launch writes when it completes."""
  addr, payload = release
  if version == "V04_00":
    return {"RELEASE_ENABLE(0)": 1, "RELEASE_STRUCTURE_SIZE(0)": RELEASE_STRUCTURE_SIZE_ONE_WORD, "RELEASE_MEMBAR_TYPE(0)": RELEASE_MEMBAR_TYPE_FE_SYSMEMBAR,
            "RELEASE_SEMAPHORE0_ADDR_LOWER": addr & 0xFFFFFFFF, "RELEASE_SEMAPHORE0_ADDR_UPPER": addr >> 32, "RELEASE_SEMAPHORE0_PAYLOAD_LOWER": payload}
  return {"RELEASE0_ENABLE": 1, "RELEASE0_STRUCTURE_SIZE": RELEASE_STRUCTURE_SIZE_ONE_WORD, "RELEASE0_MEMBAR_TYPE": RELEASE_MEMBAR_TYPE_FE_SYSMEMBAR,
          "RELEASE0_ADDRESS_LOWER": addr & 0xFFFFFFFF, "RELEASE0_ADDRESS_UPPER": addr >> 32, "RELEASE0_PAYLOAD_LOWER": payload}


def launch_fields(version: str, q: LaunchQMD) -> dict[str, int]:
  """Every nonzero field of the QMD that launches `q`."""
  if version not in ("V04_00", "V03_00"): raise ValueError(f"unknown QMD version {version!r}")
  f: dict[str, int] = {"CTA_THREAD_DIMENSION0": q.block[0], "CTA_THREAD_DIMENSION1": q.block[1], "CTA_THREAD_DIMENSION2": q.block[2],
                       "BARRIER_COUNT": q.barriers, "SHARED_MEMORY_SIZE": q.shared, "SHADER_LOCAL_MEMORY_HIGH_SIZE": q.local_high,
                       "PROGRAM_ADDRESS_LOWER": q.program & 0xFFFFFFFF, "PROGRAM_ADDRESS_UPPER": q.program >> 32,
                       "QMD_MAJOR_VERSION": MAJOR[version], "API_VISIBLE_CALL_LIMIT": API_VISIBLE_CALL_LIMIT_NO_CHECK,
                       "SAMPLER_INDEX": SAMPLER_INDEX_VIA_HEADER_INDEX, "CWD_MEMBAR_TYPE": CWD_MEMBAR_TYPE_L1_SYSMEMBAR,
                       "SASS_VERSION": int(str(q.arch), 16), "INVALIDATE_SHADER_CONSTANT_CACHE": 1, "INVALIDATE_SHADER_DATA_CACHE": 1,
                       "INVALIDATE_TEXTURE_DATA_CACHE": 1, "INVALIDATE_INSTRUCTION_CACHE": 1}
  f["MIN_SM_CONFIG_SHARED_MEM_SIZE"], f["MAX_SM_CONFIG_SHARED_MEM_SIZE"], f["TARGET_SM_CONFIG_SHARED_MEM_SIZE"] = smem_config(q.arch, q.shared, q.block[0] * q.block[1] * q.block[2])
  if version == "V04_00":
    f.update({"QMD_TYPE": QMD_TYPE_GRID_CTA, "GRID_WIDTH": q.grid[0], "GRID_HEIGHT": q.grid[1], "GRID_DEPTH": q.grid[2], "REGISTER_COUNT": q.registers})
  else:
    f.update({"QMD_VERSION": 0, "CTA_RASTER_WIDTH": q.grid[0], "CTA_RASTER_HEIGHT": q.grid[1], "CTA_RASTER_DEPTH": q.grid[2],
              "REGISTER_COUNT_V": q.registers})
  for i, (addr, size) in q.cbufs.items():
    f.update(cbuf_address_fields(version, i, addr))
    f[f"CONSTANT_BUFFER_SIZE_SHIFTED4({i})"], f[f"CONSTANT_BUFFER_VALID({i})"] = (size + 15) >> 4, 1
  if q.release is not None: f.update(release_fields(version, q.release))
  return f


def encode_launch(version: str, q: LaunchQMD) -> bytes: return qmd_encode(version, launch_fields(version, q))


def qmd_patch(version: str, value: int, fields: dict[str, int]) -> int:
  """A QMD (as an integer) with the named fields replaced: a launch patches its cached template instead of encoding anew."""
  table = _table(version)
  for name, v in fields.items():
    hi, lo = table[name]
    mask = (1 << (hi - lo + 1)) - 1
    if not 0 <= v <= mask: raise ValueError(f"QMD {version} field {name} is {hi - lo + 1} bits wide ({hi}:{lo}): {v:#x} does not fit")
    value = (value & ~(mask << lo)) | (v << lo)
  return value


def decode_launch(version: str, data: bytes) -> LaunchQMD:
  """The launch a QMD describes (what the GPU would run), read with the same field tables."""
  d = qmd_decode(version, data)
  if d["QMD_MAJOR_VERSION"] != MAJOR[version]: raise ValueError(f"QMD_MAJOR_VERSION is {d['QMD_MAJOR_VERSION']}, a {version} QMD has {MAJOR[version]}")
  cbufs: dict[int, tuple[int, int]] = {}
  if version == "V04_00":
    if d["QMD_TYPE"] != QMD_TYPE_GRID_CTA: raise ValueError(f"QMD_TYPE is {d['QMD_TYPE']}, not GRID_CTA ({QMD_TYPE_GRID_CTA}): the launch would not run as a grid")
    grid, regs = (d["GRID_WIDTH"], d["GRID_HEIGHT"], d["GRID_DEPTH"]), d["REGISTER_COUNT"]
    for i in range(8):
      if d[f"CONSTANT_BUFFER_VALID({i})"]:
        cbufs[i] = ((d[f"CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6({i})"] << 38) | (d[f"CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6({i})"] << 6),
                    d[f"CONSTANT_BUFFER_SIZE_SHIFTED4({i})"] << 4)
    release = ((d["RELEASE_SEMAPHORE0_ADDR_UPPER"] << 32 | d["RELEASE_SEMAPHORE0_ADDR_LOWER"], d["RELEASE_SEMAPHORE0_PAYLOAD_LOWER"])
               if d["RELEASE_ENABLE(0)"] else None)
  else:
    grid, regs = (d["CTA_RASTER_WIDTH"], d["CTA_RASTER_HEIGHT"], d["CTA_RASTER_DEPTH"]), d["REGISTER_COUNT_V"]
    for i in range(8):
      if d[f"CONSTANT_BUFFER_VALID({i})"]:
        cbufs[i] = (d[f"CONSTANT_BUFFER_ADDR_UPPER({i})"] << 32 | d[f"CONSTANT_BUFFER_ADDR_LOWER({i})"], d[f"CONSTANT_BUFFER_SIZE_SHIFTED4({i})"] << 4)
    release = (d["RELEASE0_ADDRESS_UPPER"] << 32 | d["RELEASE0_ADDRESS_LOWER"], d["RELEASE0_PAYLOAD_LOWER"]) if d["RELEASE0_ENABLE"] else None
  return LaunchQMD(program=d["PROGRAM_ADDRESS_UPPER"] << 32 | d["PROGRAM_ADDRESS_LOWER"], grid=grid,
                   block=(d["CTA_THREAD_DIMENSION0"], d["CTA_THREAD_DIMENSION1"], d["CTA_THREAD_DIMENSION2"]), registers=regs,
                   barriers=d["BARRIER_COUNT"], shared=d["SHARED_MEMORY_SIZE"], local_high=d["SHADER_LOCAL_MEMORY_HIGH_SIZE"], cbufs=cbufs,
                   release=release, arch=int(f"{d['SASS_VERSION']:x}"),
                   sm_config=(d["MIN_SM_CONFIG_SHARED_MEM_SIZE"], d["MAX_SM_CONFIG_SHARED_MEM_SIZE"], d["TARGET_SM_CONFIG_SHARED_MEM_SIZE"]))
