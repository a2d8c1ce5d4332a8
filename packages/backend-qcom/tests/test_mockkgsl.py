"""The kgsl runtime (qcom.py) on the kgsl mock (mockkgsl.py): PM4 encoding, the mock's checks, dispatches that compute
the right numbers only when addresses, argument order and sizes are right, and Tensor programs on DEV=MOCKKGSL+QCOM."""
from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest
from tinygrad import Context, Device, Tensor, TinyJit, Variable
from tinygrad_backend_qcom import kgsl, pm4
from tinygrad_backend_qcom.mockkgsl import MockKgsl, MockKgslError
from tinygrad_backend_qcom.opencl import cl_status
from tinygrad_backend_qcom.qcom import QCOMDevice
from tinygrad_backend_qcom.shaderobj import pack_constants

needs_cl = pytest.mark.skipif(cl_status()[1] is not None, reason=f"no OpenCL device: {cl_status()[1]}")
MOCK = "MOCKKGSL+QCOM"

SRC = """__kernel void axpb(__global float* out, __global const float* a, __global const float* b, int k) {
  int i = get_global_id(0);
  out[i] = a[i] * (float)k + 2.0f * b[i];
}"""


# the kgsl ABI: request numbers encode the struct sizes, so a misdeclared field changes them (values for a 64-bit kernel,
# _IOWR/_IOW of msm_kgsl.h with the layouts of its structs)
@pytest.mark.parametrize("name,number,size", [
  ("IOCTL_KGSL_GPU_COMMAND", 0xc040094a, 64), ("IOCTL_KGSL_GPUOBJ_ALLOC", 0xc0300945, 48), ("IOCTL_KGSL_GPUOBJ_INFO", 0xc0300947, 48),
  ("IOCTL_KGSL_GPUOBJ_FREE", 0x40200946, 32), ("IOCTL_KGSL_DRAWCTXT_CREATE", 0xc0080913, 8), ("IOCTL_KGSL_DRAWCTXT_DESTROY", 0x40040914, 4),
  ("IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID", 0x400c0907, 12)])
def test_ioctl_numbers(name: str, number: int, size: int) -> None:
  assert getattr(kgsl, name) == number
  assert ctypes.sizeof(kgsl.IOCTL_STRUCTS[number]) == size
  assert ctypes.sizeof(kgsl.kgsl_command_object) == 32


# PM4 packets
@pytest.mark.parametrize("words", [pm4.type4(pm4.HLSQ_CS_CNTL, 0x104), pm4.type4(pm4.HLSQ_CS_NDRANGE_0, *range(7)),
                                   pm4.type7(pm4.CP_EXEC_CS, 0, 4, 1, 1), pm4.type7(pm4.CP_WAIT_FOR_IDLE)])
def test_packets_round_trip(words: list[int]) -> None:
  ((kind, code, payload, at),) = pm4.decode(words)
  assert (kind, at, payload) == ("type4" if words[0] >> 28 == 4 else "type7", 0, words[1:])
  assert code in (pm4.HLSQ_CS_CNTL, pm4.HLSQ_CS_NDRANGE_0, pm4.CP_EXEC_CS, pm4.CP_WAIT_FOR_IDLE)


def test_parity_matches_freedreno() -> None:
  # freedreno's pm4_calc_odd_parity_bit: 0x9669 >> (xor of the nibbles)
  assert [pm4.odd_parity(v) for v in (0, 1, 3, 0x33, 0xb990, 0x7f)] == [1, 0, 1, 1, 0, 0]
  assert pm4.type7(pm4.CP_EXEC_CS, 0, 1, 1, 1)[0] == 0x70b30004  # opcode 0x33 (parity 1), count 4 (parity 0)


@pytest.mark.parametrize("words,match", [
  ([pm4.type4(pm4.HLSQ_CS_CNTL, 1)[0] ^ (1 << 27), 1], "wrong parity bit"),
  ([pm4.type4(pm4.HLSQ_CS_CNTL, 1)[0] ^ (1 << 7), 1], "wrong parity bit"),
  ([pm4.type7(pm4.CP_NOP, 1)[0] ^ (1 << 23), 1], "type7 header .* is malformed"),
  ([pm4.type7(pm4.CP_NOP, 1)[0] | (1 << 25), 1], "bits 24-27 must be 0"),
  ([0x00001234], "not a type4 or type7 packet header"),
  (pm4.type7(pm4.CP_EXEC_CS, 0, 1, 1, 1)[:3], "declares 4 payload dwords but only 2 remain")])
def test_malformed_packets(words: list[int], match: str) -> None:
  with pytest.raises(pm4.PacketError, match=match): pm4.decode(words)


def test_encoder_limits() -> None:
  with pytest.raises(ValueError, match="1..127 registers"): pm4.type4(0x10, *([0] * 128))
  with pytest.raises(ValueError, match="19 bits"): pm4.type4(1 << 19, 0)


# the mock driver and command processor, under the runtime
@pytest.fixture
def dev() -> QCOMDevice: return QCOMDevice("QCOM", MockKgsl())


def _bufs(dev: QCOMDevice, *arrays: np.ndarray) -> list:
  out = []
  for a in arrays:
    b = dev.allocator.alloc(a.nbytes)
    dev.allocator.copyin(b, memoryview(np.ascontiguousarray(a)))
    out.append(b)
  return out


def _read(dev: QCOMDevice, buf, n: int) -> np.ndarray:
  out = np.empty(n, np.float32)
  dev.allocator.copyout(memoryview(out), buf)
  return out


@pytest.fixture
def axpb(dev: QCOMDevice):
  from tinygrad_backend_qcom.compiler import CLCompiler
  return dev.runtime("axpb", CLCompiler().compile(SRC))


@needs_cl
def test_dispatch_computes(dev: QCOMDevice, axpb) -> None:
  a, b = np.arange(64, dtype=np.float32), np.linspace(-1, 1, 64, dtype=np.float32)
  out, ba, bb = _bufs(dev, np.zeros(64, np.float32), a, b)
  axpb(out, ba, bb, global_size=(4, 1, 1), local_size=(16, 1, 1), vals=(3,))
  np.testing.assert_array_equal(_read(dev, out, 64), a * 3 + 2 * b)
  assert dev.iface.cp.dispatches == 1 and dev.iface.submissions == 1


@needs_cl
def test_wrong_arguments_give_wrong_numbers(dev: QCOMDevice, axpb) -> None:
  a, b = np.arange(64, dtype=np.float32), np.linspace(-1, 1, 64, dtype=np.float32)
  out, ba, bb = _bufs(dev, np.zeros(64, np.float32), a, b)
  axpb(out, bb, ba, global_size=(4, 1, 1), local_size=(16, 1, 1), vals=(3,))   # a and b swapped
  assert not np.array_equal(_read(dev, out, 64), a * 3 + 2 * b)
  axpb(out, ba, bb, global_size=(4, 1, 1), local_size=(16, 1, 1), vals=(5,))   # another constant
  np.testing.assert_array_equal(_read(dev, out, 64), a * 5 + 2 * b)
  out2, = _bufs(dev, np.zeros(64, np.float32))
  axpb(out2, ba, bb, global_size=(2, 1, 1), local_size=(16, 1, 1), vals=(5,))  # half the grid: the rest stays 0
  got = _read(dev, out2, 64)
  np.testing.assert_array_equal(got[:32], (a * 5 + 2 * b)[:32])
  assert not got[32:].any()


@needs_cl
def test_views_are_addresses(dev: QCOMDevice, axpb) -> None:
  align = 128  # PoCL's sub-buffer alignment, and so the mock's
  a = np.arange(128, dtype=np.float32)
  out, ba = _bufs(dev, np.zeros(32, np.float32), a)
  view = dev.allocator.view(ba, align, 32 * 4)  # a[32:64]
  axpb(out, view, view, global_size=(2, 1, 1), local_size=(16, 1, 1), vals=(1,))
  np.testing.assert_array_equal(_read(dev, out, 32), a[32:64] * 3)


def _submit(dev: QCOMDevice, ib: list[int]) -> None:
  dev.submit(ib, dev.next_fence())


def test_unknown_register_rejected(dev: QCOMDevice) -> None:
  with pytest.raises(pm4.PacketError, match="register 0x1234 is not one a compute dispatch writes"):
    _submit(dev, pm4.type4(0x1234, 0))


def test_unknown_opcode_and_bad_count(dev: QCOMDevice) -> None:
  with pytest.raises(pm4.PacketError, match="opcode 0x7f is not supported"): _submit(dev, pm4.type7(0x7f))
  with pytest.raises(pm4.PacketError, match="CP_EXEC_CS takes 4 payload dwords, got 2"): _submit(dev, pm4.type7(pm4.CP_EXEC_CS, 0, 1))


def test_address_outside_objects(dev: QCOMDevice) -> None:
  obj = dev.gpu_alloc(256)
  end = obj.gpuaddr + obj.size
  with pytest.raises(pm4.PacketError, match="is not inside any allocated GPU object"):
    _submit(dev, pm4.event_write_ts(pm4.CACHE_FLUSH_TS, end + 64, 1))
  with pytest.raises(pm4.PacketError, match="runs past the end of GPU object"):
    _submit(dev, pm4.load_state6(pm4.ST6_CONSTANTS, pm4.SS6_INDIRECT, pm4.SB6_CS_SHADER, 2, end - 16))


def _dispatch_ib(shader_addr: int, instrlen: int, global_x: int) -> list[int]:
  return [*pm4.type4(pm4.HLSQ_CS_CNTL, 1 | 1 << 8), *pm4.type4(pm4.SP_CS_OBJ_START_LO, *pm4.lo_hi(shader_addr)),
          *pm4.type4(pm4.SP_CS_INSTRLEN, instrlen), *pm4.type4(pm4.HLSQ_CS_NDRANGE_0, 1 | (15 << 2), global_x, 0, 1, 0, 1, 0),
          *pm4.type7(pm4.CP_EXEC_CS, 0, 4, 1, 1)]


def test_bad_sizes_rejected(dev: QCOMDevice, axpb) -> None:
  # a global size that isn't local size x work-groups
  with pytest.raises(pm4.PacketError, match=r"global size \(60, 1, 1\) is not local size \(16, 1, 1\) x work-groups \(4, 1, 1\)"):
    _submit(dev, _dispatch_ib(axpb.shader.gpuaddr, axpb.instrlen, 60))
  with pytest.raises(pm4.PacketError, match="no kernel arguments"): _submit(dev, _dispatch_ib(axpb.shader.gpuaddr, axpb.instrlen, 64))
  # a shader address that isn't a loaded program, and a shader length past its object
  _submit(dev, pm4.load_state6(pm4.ST6_CONSTANTS, pm4.SS6_INDIRECT, pm4.SB6_CS_SHADER, 1,
                               dev.ring_write("const", pack_constants([], []))))
  data = dev.gpu_alloc(4096)
  with pytest.raises(pm4.PacketError, match="not a QCOM shader image"): _submit(dev, _dispatch_ib(data.gpuaddr, 16, 64))
  with pytest.raises(pm4.PacketError, match="runs past the end of GPU object"):
    _submit(dev, _dispatch_ib(axpb.shader.gpuaddr, axpb.instrlen + 1024, 64))


def test_dispatch_without_state(dev: QCOMDevice) -> None:
  with pytest.raises(pm4.PacketError, match="dispatch before these registers were written: HLSQ_CS_CNTL"):
    _submit(dev, pm4.type7(pm4.CP_EXEC_CS, 0, 1, 1, 1))


@needs_cl
def test_argument_count_checked(dev: QCOMDevice, axpb) -> None:
  out, = _bufs(dev, np.zeros(16, np.float32))
  with pytest.raises(pm4.PacketError, match="kernel axpb takes 4 arguments, but the constants hold 1 buffer"):
    axpb(out, global_size=(1, 1, 1), local_size=(16, 1, 1))


def test_driver_checks(dev: QCOMDevice) -> None:
  k = dev.iface
  with pytest.raises(MockKgslError, match="no GPU object with id 999"): k.ioctl(kgsl.IOCTL_KGSL_GPUOBJ_INFO, kgsl.kgsl_gpuobj_info(id=999))
  with pytest.raises(MockKgslError, match="takes struct kgsl_gpuobj_info"): k.ioctl(kgsl.IOCTL_KGSL_GPUOBJ_INFO, kgsl.kgsl_gpuobj_free())
  with pytest.raises(MockKgslError, match="timestamp 99 of context .* was never submitted"):
    k.ioctl(kgsl.IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID, kgsl.kgsl_device_waittimestamp_ctxtid(context_id=dev.ctx_id, timestamp=99))
  with pytest.raises(MockKgslError, match="offset must be id << 12"): k.mmap(4096, (dev.fence_obj.id << 12) + 4)
  # an IB that isn't inside the object the command list names
  obj = dev.rings["cmd"]
  cmd = kgsl.kgsl_command_object(gpuaddr=obj.gpuaddr + obj.size - 4, size=8, flags=kgsl.KGSL_CMDLIST_IB, id=obj.id)
  sub = kgsl.kgsl_gpu_command(cmdlist=ctypes.addressof(cmd), cmdsize=ctypes.sizeof(cmd), numcmds=1, context_id=dev.ctx_id)
  with pytest.raises(MockKgslError, match="is not inside GPU object"): k.ioctl(kgsl.IOCTL_KGSL_GPU_COMMAND, sub)


def test_fence_written_by_the_command_processor(dev: QCOMDevice) -> None:
  _submit(dev, [*pm4.type7(pm4.CP_WAIT_FOR_IDLE)])  # no CP_EVENT_WRITE: the fence never arrives
  with pytest.raises(RuntimeError, match="skipped the CP_EVENT_WRITE"): dev.synchronize()
  fence = dev.next_fence()
  dev.submit(pm4.event_write_ts(pm4.CACHE_FLUSH_TS, dev.fence_addr, fence), fence)
  dev.synchronize()
  assert struct.unpack_from("<I", dev.fence_obj.mem)[0] == fence


# Tensor programs on DEV=MOCKKGSL+QCOM (the a630 arch: its float kernels, as an Adreno would get them)
@needs_cl
def test_tensor_programs() -> None:
  with Context(DEV=MOCK):
    assert "MOCKKGSL" in repr(Device[Device.DEFAULT])
    Tensor.manual_seed(0)
    x, w = Tensor.randn(33, 47), Tensor.randn(47, 20)
    got = ((x @ w).relu().sum(axis=0) + x.max()).numpy()
    xn, wn = x.numpy(), w.numpy()
  np.testing.assert_allclose(got, np.maximum(xn @ wn, 0).sum(axis=0) + xn.max(), rtol=1e-5, atol=1e-4)


@needs_cl
def test_symbolic_variable() -> None:
  with Context(DEV=MOCK):
    a = Tensor.arange(16).float().contiguous().realize()
    v = Variable("n", 1, 16)
    got = [a[:v.bind(n)].sum().item() for n in (3, 10)]
  assert got == [3.0, 45.0]


@needs_cl
def test_tinyjit_replays() -> None:
  with Context(DEV=MOCK):
    @TinyJit
    def f(a: Tensor, b: Tensor) -> Tensor: return (a * b + a.exp2()).sum(axis=1).realize()
    k = Device[Device.DEFAULT].iface
    for i in range(4):
      a, b = Tensor.full((8, 8), float(i)).contiguous().realize(), Tensor.ones(8, 8).contiguous().realize()
      before = k.cp.dispatches
      np.testing.assert_allclose(f(a, b).numpy(), np.full(8, 8 * (i + 2.0 ** i)), rtol=1e-6)
      assert k.cp.dispatches > before  # every call, replays included, dispatched on the mock command processor


@needs_cl
def test_tinyjit_graph_is_one_submission() -> None:
  with Context(DEV=MOCK):
    @TinyJit
    def f(a: Tensor) -> Tensor: return ((a + 1).contiguous() * 2).contiguous().sum().realize()
    k = Device[Device.DEFAULT].iface
    for i in range(5):
      a = Tensor.full((16,), float(i)).contiguous().realize()
      subs, disp = k.submissions, k.cp.dispatches
      assert f(a).item() == 16 * (i + 1) * 2
      if i >= 2:  # replays: the captured kernels in one IB
        assert k.submissions - subs == 1 and k.cp.dispatches - disp >= 3


def test_plain_qcom_never_uses_the_mock() -> None:
  import os
  if os.path.exists("/dev/kgsl-3d0"): pytest.skip("/dev/kgsl-3d0 exists here")
  if cl_status()[1] is None:
    with Context(DEV=MOCK): Tensor([1.0]).realize()  # a mock instance is open in this process ...
  with Context(DEV="QCOM"), pytest.raises(RuntimeError, match="MOCKKGSL\\+QCOM"):
    Tensor([1.0, 2.0]).realize()  # ... and DEV=QCOM still says there is no kgsl device, naming the mock
  with Context(DEV="KGSL+QCOM"), pytest.raises(RuntimeError, match="no kgsl device is available"):
    Tensor([1.0, 2.0]).realize()
