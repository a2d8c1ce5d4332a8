"""MOCKKFD+AMD: the KFD runtime on the mock KFD. Packet-level checks of the queue layer (every malformed packet, wrong
address or misused ioctl is a clear error) and end-to-end Tensor programs whose kernels the mock runs from their packets."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest
from amd_harness import needs_hip
from tinygrad import Device, GlobalCounters, Tensor, TinyJit, Variable, dtypes
from tinygrad.codegen.program import get_program
from tinygrad.device.plugin import add_inputs, read_floats
from tinygrad.device.plugin import add_kernel as mock_add_kernel
from tinygrad.helpers import Context
from tinygrad.schedule.kernelize import create_schedule
from tinygrad.uop.ops import Ops
from tinygrad_backend_amd import hsa
from tinygrad_backend_amd import kfd_ioctl as kfd
from tinygrad_backend_amd.iface import MAP_ANONYMOUS, MAP_NORESERVE, MAP_PRIVATE, PROT_NONE
from tinygrad_backend_amd.mockgpu import PacketError
from tinygrad_backend_amd.mockkfd import MockKFD
from tinygrad_backend_amd.runtime import GTT, VRAM, AMDDevice

pytestmark = needs_hip
MOCK = "MOCKKFD+AMD"


@pytest.fixture
def dev():
  return AMDDevice(MockKFD("gfx1100"), 0, "")


@pytest.fixture(scope="module")
def add_kernel():
  """c = a + b over 64 floats, rendered for the mock (so it knows the kernel's uops): core's shared mock test kernel."""
  with Context(DEV=MOCK): return mock_add_kernel(Device.renderer(Device.DEFAULT))


def _setup(dev: AMDDevice, add_kernel): return add_inputs(dev, add_kernel)
def _out(dev: AMDDevice, buf) -> np.ndarray: return np.array(read_floats(dev, buf), dtype=np.float32)


def _packet(dev, spec, prg, bufs) -> hsa.KernelDispatchPacket:
  gs, ls = spec.launch_dims({})
  kernarg = dev.kernarg(prg.info.kernarg_size, prg.info.kernarg_align)
  prg.fill_kernargs(kernarg, tuple(bufs), ())
  return dev.dispatch_packet(prg, kernarg, gs, ls, dev._signal())


def test_dispatch_runs_the_kernel(dev, add_kernel):
  spec, prg, bufs = _setup(dev, add_kernel)
  t = prg(*bufs, global_size=spec.launch_dims({})[0], local_size=spec.launch_dims({})[1], wait=True)
  np.testing.assert_equal(_out(dev, bufs[0]), np.arange(64) + 100)
  assert t is not None and t > 0  # from the completion signal's start/end timestamps


def test_wrong_kernarg_layout_gives_wrong_numbers(dev, add_kernel):
  """The mock reads the arguments where the code object's metadata says: pointers in the wrong order write elsewhere."""
  spec, prg, bufs = _setup(dev, add_kernel)
  pkt = _packet(dev, spec, prg, [bufs[1], bufs[0], bufs[2]])
  dev.submit([pkt])
  dev._wait(pkt.completion_signal)
  np.testing.assert_equal(_out(dev, bufs[1]), np.full(64, 100))  # a = 0 + 100, computed into the input
  np.testing.assert_equal(_out(dev, bufs[0]), np.zeros(64))      # the output never written


def _rejects(dev, spec, prg, bufs, match: str, **fields) -> None:
  pkt = _packet(dev, spec, prg, bufs)
  for k, v in fields.items(): setattr(pkt, k, v)
  with pytest.raises(PacketError, match=match): dev.submit([pkt])


@pytest.mark.parametrize("fields,match", [
  ({"header": hsa.header(hsa.PACKET_TYPE_INVALID)}, "header type is INVALID"),
  ({"header": hsa.header(7)}, "header type 7 is not"),
  ({"header": hsa.header(hsa.PACKET_TYPE_KERNEL_DISPATCH, release=hsa.FENCE_SCOPE_AGENT)}, "release fence scope is 1, not SYSTEM"),
  ({"header": hsa.header(hsa.PACKET_TYPE_KERNEL_DISPATCH, acquire=hsa.FENCE_SCOPE_NONE)}, "acquire fence scope is NONE"),
  ({"header": hsa.header(hsa.PACKET_TYPE_KERNEL_DISPATCH, barrier=False)}, "barrier bit is clear"),
  ({"setup": 0}, "setup names 0 grid dimensions"),
  ({"grid_size_y": 2}, "setup says 1 dimension"),
  ({"grid_size_x": 63}, "grid size 63 is not a multiple of the workgroup size"),
  ({"workgroup_size_x": 0}, "workgroup size 0"),
  ({"workgroup_size_x": 512, "grid_size_x": 512}, "workgroup of 512 work-items, its code object allows"),
  ({"kernarg_address": 0x1000}, "kernarg buffer 0x1000.* is not in memory mapped to this GPU"),
  ({"completion_signal": 0x2000}, "completion signal 0x2000.* is not in memory mapped"),
])
def test_malformed_packet_is_caught(dev, add_kernel, fields, match):
  spec, prg, bufs = _setup(dev, add_kernel)
  _rejects(dev, spec, prg, bufs, match, **fields)


@pytest.mark.parametrize("case", ["descriptor", "executable", "overwritten"])
def test_kernel_object_must_be_a_loaded_descriptor(dev, add_kernel, case):
  spec, prg, bufs = _setup(dev, add_kernel)
  if case == "descriptor": _rejects(dev, spec, prg, bufs, "where no kernel descriptor is", kernel_object=prg.kernel_object + 64)
  if case == "executable": _rejects(dev, spec, prg, bufs, "not allocated EXECUTABLE", kernel_object=bufs[0].va)
  if case == "overwritten":
    ctypes.c_uint8.from_address(prg.mem.va + prg.info.kd_offset + 200).value ^= 0xFF  # the program in memory, overwritten
    _rejects(dev, spec, prg, bufs, "holds no code object the mock renderer recorded")


def test_a_queue_stops_at_its_first_error(dev, add_kernel):
  spec, prg, bufs = _setup(dev, add_kernel)
  _rejects(dev, spec, prg, bufs, "setup names 0", setup=0)
  with pytest.raises(PacketError, match="queue 0 stopped at an earlier error.*setup names 0"): dev.submit([_packet(dev, spec, prg, bufs)])


def test_unmapped_buffer_pointer_is_caught(dev, add_kernel):
  spec, prg, bufs = _setup(dev, add_kernel)
  dev.free(bufs[2])
  with pytest.raises(PacketError, match="argument 2 \\(a buffer pointer\\) 0x[0-9a-f]+\\+0x1 is not in memory mapped to this GPU"):
    prg(*bufs, global_size=spec.launch_dims({})[0], local_size=spec.launch_dims({})[1])


def test_wrong_argument_count_is_caught(dev, add_kernel):
  spec, prg, bufs = _setup(dev, add_kernel)
  with pytest.raises(TypeError, match="takes 3 arguments, got 2 buffers and 0 values"): prg(*bufs[:2])


def test_signal_rules(dev, add_kernel):
  spec, prg, bufs = _setup(dev, add_kernel)
  pkt = _packet(dev, spec, prg, bufs)
  hsa.AmdSignal.from_address(pkt.completion_signal).kind = 0
  with pytest.raises(PacketError, match="has kind 0, not a user signal"): dev.submit([pkt])


def test_doorbell_past_the_write_index(dev):
  with pytest.raises(PacketError, match="doorbell names packet 5, but the write dispatch id is 0"): dev.iface.write_doorbell(dev.doorbell, 5)


def test_ioctl_misuse_is_caught():
  m = MockKFD("gfx942")
  fd = m.open("/dev/kfd")
  va = m.mmap(0, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
  args = kfd.kfd_ioctl_alloc_memory_of_gpu_args(va_addr=va, size=8192, gpu_id=0x1002, flags=GTT)
  with pytest.raises(OSError, match="ALLOC_MEMORY_OF_GPU before ACQUIRE_VM"): m.ioctl(fd, kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, args)
  drm = m.open("/dev/dri/renderD128")
  with pytest.raises(OSError, match="gpu_id 0x1 is not a GPU"): m.ioctl(fd, kfd.AMDKFD_IOC_ACQUIRE_VM, kfd.kfd_ioctl_acquire_vm_args(drm_fd=drm, gpu_id=1))
  m.ioctl(fd, kfd.AMDKFD_IOC_ACQUIRE_VM, kfd.kfd_ioctl_acquire_vm_args(drm_fd=drm, gpu_id=0x1002))
  with pytest.raises(OSError, match="outside every reserved VA range"):
    m.ioctl(fd, kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, kfd.kfd_ioctl_alloc_memory_of_gpu_args(va_addr=va + 8192, size=4096, gpu_id=0x1002, flags=VRAM))
  m.ioctl(fd, kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, args)
  with pytest.raises(OSError, match="overlaps another"):
    m.ioctl(fd, kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, kfd.kfd_ioctl_alloc_memory_of_gpu_args(va_addr=va + 4096, size=4096, gpu_id=0x1002, flags=VRAM))
  with pytest.raises(OSError, match="must be mapped MAP_FIXED at its VA"): m.mmap(va + 4096, 4096, 3, 1, drm, args.mmap_offset)
  with pytest.raises(OSError, match="ioctl 0xdead is not one MOCKKFD implements"): m.ioctl(fd, 0xDEAD, args)
  with pytest.raises(OSError, match="takes kfd_ioctl_get_version_args"): m.ioctl(fd, kfd.AMDKFD_IOC_GET_VERSION, args)
  with pytest.raises(OSError, match="free the allocation there first"): m.munmap(va, 8192)


def test_arch_mismatch_is_clear():
  with pytest.raises(RuntimeError, match="is a gfx1100, but DEV asks to compile for gfx950"): AMDDevice(MockKFD("gfx1100"), 0, "gfx950")


# ---- Tensor programs on DEV=MOCKKFD+AMD

def test_tensor_programs():
  with Context(DEV=MOCK):
    assert type(Device["AMD"]).__name__ == "AMDDevice" and Device["AMD"].iface.name == "MOCKKFD"
    a_np, b_np = np.random.default_rng(0).standard_normal((2, 3, 17)).astype(np.float32), np.random.default_rng(1).standard_normal(17).astype(np.float32)
    a, b = Tensor(a_np), Tensor(b_np)
    np.testing.assert_allclose((a * b + 1).numpy(), a_np * b_np + 1, rtol=1e-6)
    np.testing.assert_allclose(a.sum(axis=2).numpy(), a_np.sum(axis=2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a.max(axis=(0, 1)).numpy(), a_np.max(axis=(0, 1)))
    np.testing.assert_allclose(a[1, 1:, 3:9].exp().numpy(), np.exp(a_np[1, 1:, 3:9]), rtol=1e-5)  # a view's offset
    x, y = Tensor(a_np[0]), Tensor(a_np[1].T)
    np.testing.assert_allclose((x @ y).numpy(), a_np[0] @ a_np[1].T, rtol=1e-5, atol=1e-5)
    assert Tensor.arange(10, dtype=dtypes.int32).cumsum().tolist() == list(np.cumsum(range(10)))


def test_tinyjit_replays_as_a_device_graph():
  with Context(DEV=MOCK):
    n = Variable("n", 1, 16)
    @TinyJit
    def f(x: Tensor, y: Tensor, k) -> Tensor: return ((x * y).relu() + x).shrink(((0, k),)).sum()
    rng = np.random.default_rng(2)
    for i in range(6):
      x_np, y_np = rng.standard_normal(16).astype(np.float32), rng.standard_normal(16).astype(np.float32)
      k = 3 + i
      out = f(Tensor(x_np), Tensor(y_np), n.bind(k)).item()
      np.testing.assert_allclose(out, (np.maximum(x_np * y_np, 0) + x_np)[:k].sum(), rtol=1e-5, atol=1e-5)
    assert f.graph is not None and type(f.graph.graph).__name__ == "AMDGraph"  # kernargs patched per replay (new inputs, k)


def test_half_matmul_uses_wmma(capfd):
  """A half matmul on the mock: its HIP source calls the RDNA3 WMMA builtin (DEBUG=4 shows it), and the mock's wave32
  emulation of that instruction (the same as PYTHON::gfx1100's) gives numpy's numbers."""
  rng = np.random.default_rng(3)
  a_np, b_np = rng.standard_normal((32, 64)).astype(np.float16), rng.standard_normal((64, 32)).astype(np.float16)
  with Context(DEV=MOCK):
    a, b = Tensor(a_np).realize(), Tensor(b_np).realize()
    capfd.readouterr()
    with Context(DEBUG=4): out = (a @ b).float().numpy()
  src = capfd.readouterr().out
  assert "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32(" in src, src[-2000:]
  np.testing.assert_allclose(out, a_np.astype(np.float64) @ b_np.astype(np.float64), atol=2e-2, rtol=1e-2)


def test_mfma_wave64_on_a_mock_gfx950():
  """gfx950 in its own process (the mock GPU's arch is fixed when it opens): MFMA 16x16x32 in wave64."""
  code = ("import numpy as np\nfrom tinygrad import Tensor\nr = np.random.default_rng(4)\n"
          "a, b = r.standard_normal((32, 64)).astype(np.float16), r.standard_normal((64, 32)).astype(np.float16)\n"
          "out = (Tensor(a) @ Tensor(b)).float().numpy()\n"
          "np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), atol=2e-2, rtol=1e-2)\n")
  p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "DEV": "MOCKKFD+AMD::gfx950", "DEBUG": "4"})
  assert p.returncode == 0, p.stderr[-3000:]
  assert "__builtin_amdgcn_mfma_f32_16x16x32_f16(" in p.stdout


def test_kernel_count_matches_dispatches():
  with Context(DEV=MOCK):
    x = Tensor.ones(8, 8).contiguous().realize()
    GlobalCounters.reset()
    (x * 2 + 1).sum(0).realize()
    start = Device["AMD"].wptr
    (x * 3).realize()
    assert Device["AMD"].wptr == start + GlobalCounters.kernel_count - (GlobalCounters.kernel_count - 1)  # one packet per kernel


@pytest.mark.parametrize("dev, instr", [(MOCK, "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32("),
                                        ("MOCKKFD+AMD:LLVM", "call <8 x float> @llvm.amdgcn.wmma.f32.16x16x16.f16.v8f32.v16f16(")])
def test_llvm_and_hip_matmuls_on_the_mock(capfd, dev, instr):
  """The LLVM renderer on the mock too: its compiler records each kernel's PYTHON program like HIP's does, so the mock runs
  LLVM-rendered dispatches (the half matmul's WMMA intrinsic included) and the numbers are numpy's."""
  rng = np.random.default_rng(6)
  a_np, b_np = rng.standard_normal((32, 64)).astype(np.float16), rng.standard_normal((64, 32)).astype(np.float16)
  with Context(DEV=dev):
    a, b = Tensor(a_np).realize(), Tensor(b_np).realize()
    capfd.readouterr()
    with Context(DEBUG=4): out = a.matmul(b, dtype=dtypes.float32).numpy()
    assert instr in capfd.readouterr().out
    np.testing.assert_allclose(out, a_np.astype(np.float64) @ b_np.astype(np.float64), atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose((Tensor([1.0, 2.0, 3.0]).exp2() * 2 - 1).numpy(), [3.0, 7.0, 15.0])


@pytest.mark.parametrize("dev", [MOCK, "MOCKKFD+AMD:LLVM"])
def test_int8_wmma_on_the_mock(dev):
  rng = np.random.default_rng(7)
  a_np, b_np = rng.integers(-128, 128, (32, 32), dtype=np.int8), rng.integers(-128, 128, (32, 48), dtype=np.int8)
  with Context(DEV=dev):
    a, b = Tensor(a_np).realize(), Tensor(b_np).realize()
    out = a.cast(dtypes.int32) @ b.cast(dtypes.int32)
    items, _ = create_schedule([out.uop])
    (prog,) = [get_program(it.ast, Device.renderer(Device.DEFAULT)) for it in items if it.ast.op is Ops.SINK]
    assert {u.arg[0] for u in prog.uops if u.op is Ops.WMMA} == {"wmma_i32_16x16x16_iu8"}
    np.testing.assert_array_equal(out.numpy(), a_np.astype(np.int32) @ b_np.astype(np.int32))


def test_llvm_mfma_wave64_on_a_mock_gfx950():
  """MOCKKFD+AMD:LLVM:gfx950 in its own process: the MFMA intrinsics in wave64, bf16 (as <8 x bfloat>) and f16."""
  code = ("import numpy as np\nfrom tinygrad import Tensor, dtypes\nr = np.random.default_rng(8)\n"
          "a, b = r.standard_normal((32, 64)).astype(np.float32), r.standard_normal((64, 32)).astype(np.float32)\n"
          "for dt in (dtypes.float16, dtypes.bfloat16):\n"
          "  x, y = Tensor(a).cast(dt).realize(), Tensor(b).cast(dt).realize()\n"
          "  xn, yn = x.float().numpy().astype(np.float64), y.float().numpy().astype(np.float64)\n"
          "  np.testing.assert_allclose(x.matmul(y, dtype=dtypes.float32).numpy(), xn @ yn, atol=1e-4, rtol=1e-4)\n")
  p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "DEV": "MOCKKFD+AMD:LLVM:gfx950", "DEBUG": "4"})
  assert p.returncode == 0, p.stderr[-3000:]
  assert "@llvm.amdgcn.mfma.f32.16x16x32.f16(" in p.stdout and "@llvm.amdgcn.mfma.f32.16x16x32.bf16(" in p.stdout


def test_beam_search_runs_on_the_mock():
  """BEAM times candidate kernels compiled outside the disk cache: the mock learns those programs too."""
  with Context(DEV=MOCK):
    x_np = np.random.default_rng(5).standard_normal((8, 16)).astype(np.float32)
    with Context(BEAM=2): out = Tensor(x_np).sum(axis=1).numpy()
  np.testing.assert_allclose(out, x_np.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_barrier_and_packet(dev):
  done, pending = dev._signal(), dev._signal()
  dev.submit([hsa.BarrierAndPacket(header=hsa.header(hsa.PACKET_TYPE_BARRIER_AND), completion_signal=done)])
  assert hsa.AmdSignal.from_address(done).value == 0  # completed
  with pytest.raises(PacketError, match="barrier waits on signal .* which nothing will complete"):
    dev.submit([hsa.BarrierAndPacket(header=hsa.header(hsa.PACKET_TYPE_BARRIER_AND), dep_signal=(ctypes.c_uint64 * 5)(pending))])


def test_plain_hip_code_object_is_refused(dev, add_kernel):
  """A code object from the plain HIP compiler carries no program: the mock can't run it and says why."""
  from tinygrad_backend_amd.hip import HIPCompiler
  spec, _ = add_kernel
  with pytest.raises(ValueError, match="not compiled for MOCKKFD\\+AMD"): dev.runtime(spec.name, HIPCompiler("gfx1100").compile(spec.src))
