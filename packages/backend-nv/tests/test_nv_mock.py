"""MOCK+NV: the NVK+NV runtime on the mock driver. Checks at the level of methods and QMDs (every malformed method, wrong
address, missing semaphore or misused ioctl is a clear error; a wrong QMD field or argument gives wrong numbers or an
error), and end-to-end Tensor programs and TinyJit replays whose kernels the mock runs from their QMDs."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from tinygrad import Device, GlobalCounters, Tensor, TinyJit, Variable, dtypes
from tinygrad.device.plugin import KernelLaunch, add_inputs, read_floats
from tinygrad.device.plugin import add_kernel as mock_add_kernel
from tinygrad.helpers import Context
from tinygrad_backend_nv import nv_classes as cls
from tinygrad_backend_nv import nv_ioctl as nv
from tinygrad_backend_nv import nvruntime
from tinygrad_backend_nv.mockgpfifo import GPFIFOError
from tinygrad_backend_nv.mocknv import MockNV
from tinygrad_backend_nv.nvrm import NVError
from tinygrad_backend_nv.nvruntime import NVKDevice
from tinygrad_backend_nv.qmd import QMD_BYTES, qmd_decode, qmd_encode

MOCK = "MOCK+NV"


@pytest.fixture
def dev() -> NVKDevice:
  return NVKDevice(MockNV("sm_90"), 0, "")


@pytest.fixture(scope="module")
def add_kernel():
  """c = a + b over 64 floats, rendered for the mock (so it knows the kernel's uops): core's shared mock test kernel."""
  with Context(DEV=MOCK): return mock_add_kernel(Device.renderer(Device.DEFAULT))


def _setup(dev: NVKDevice, add_kernel): return add_inputs(dev, add_kernel)
def _out(dev: NVKDevice, buf) -> np.ndarray: return np.array(read_floats(dev, buf), dtype=np.float32)


def _launch_qmd(dev: NVKDevice, spec, prg, bufs, patch: dict[str, int] | None = None) -> None:
  """Write one launch's QMD and constant bank like the runtime does, change QMD fields, and submit it."""
  gs, ls = spec.launch_dims({})
  off = dev.launch_slot()
  qmd = prg.fill(dev.launch_ring.cpu + off, dev.launch_ring.va + off, tuple(bufs), (), gs, ls, None)
  if patch:
    v = dev.qmd_version
    fields = {k: x for k, x in qmd_decode(v, bytes(dev.launch_ring.view(off, QMD_BYTES[v]))).items() if x}
    dev.launch_ring.view(off, QMD_BYTES[v])[:] = qmd_encode(v, {**fields, **patch})
  dev.submit(cls.PushBuffer().launch(qmd))
  dev.synchronize()


def test_launch_runs_the_kernel(dev, add_kernel):
  spec, prg, bufs = _setup(dev, add_kernel)
  gs, ls = spec.launch_dims({})
  t = prg(*bufs, global_size=gs, local_size=ls, wait=True)
  np.testing.assert_equal(_out(dev, bufs[0]), np.arange(64) + 100)
  assert t is not None and t > 0  # from the host semaphores' timestamps around the launch
  assert dev.qmd_release.value == dev.launches  # the QMD's own release semaphore came too


def test_wrong_arguments_give_wrong_numbers(dev, add_kernel):
  """The mock reads the params where the cubin says (constant bank 0 + EIATTR_PARAM_CBANK): swapped pointers write elsewhere."""
  spec, prg, bufs = _setup(dev, add_kernel)
  _launch_qmd(dev, spec, prg, [bufs[1], bufs[0], bufs[2]])
  np.testing.assert_equal(_out(dev, bufs[1]), np.full(64, 100))  # a = 0 + 100, computed into the input
  np.testing.assert_equal(_out(dev, bufs[0]), np.zeros(64))      # the output never written


def test_wrong_grid_gives_wrong_numbers(dev, add_kernel):
  spec, prg, bufs = _setup(dev, add_kernel)
  gs, ls = spec.launch_dims({})
  _launch_qmd(dev, spec, prg, bufs, {"GRID_WIDTH": 1} if gs[0] > 1 else {"CTA_THREAD_DIMENSION0": ls[0] // 2})
  out, want = _out(dev, bufs[0]), np.arange(64) + 100
  done = int(np.argmin(out == want))
  assert 0 < done < 64 and (out[:done] == want[:done]).all() and (out[done:] == 0).all()  # only the first block (or half of it) computed


@pytest.mark.parametrize("patch,match", [
  ({"QMD_MAJOR_VERSION": 3}, "QMD_MAJOR_VERSION is 3, a V04_00 QMD has 4"),
  ({"QMD_TYPE": 0}, "QMD_TYPE is 0, not GRID_CTA"),
  ({"PROGRAM_ADDRESS_LOWER": 0}, "program address 0x1000000000 holds no kernel code the mock recorded"),
  ({"PROGRAM_ADDRESS_UPPER": 0x7F}, "program address 0x7f.* holds no kernel code"),
  ({"CONSTANT_BUFFER_VALID(0)": 0}, "constant buffer 0 .its parameters. is not valid"),
  ({"CONSTANT_BUFFER_SIZE_SHIFTED4(0)": 1}, "constant buffer 0 is 16 bytes, its params end at"),
  ({"REGISTER_COUNT": 1}, "QMD gives 1 registers per thread"),
  ({"GRID_HEIGHT": 0}, "grid .* must be >= 1"),
  ({"SHADER_LOCAL_MEMORY_HIGH_SIZE": 0}, "QMD gives 0 bytes of stack"),
])
def test_wrong_qmd_fields_are_caught(dev, add_kernel, patch, match):
  spec, prg, bufs = _setup(dev, add_kernel)
  with pytest.raises(GPFIFOError, match=match): _launch_qmd(dev, spec, prg, bufs, patch)


def test_the_channel_stops_at_its_first_error(dev, add_kernel):
  spec, prg, bufs = _setup(dev, add_kernel)
  with pytest.raises(GPFIFOError, match="QMD_TYPE is 0"): _launch_qmd(dev, spec, prg, bufs, {"QMD_TYPE": 0})
  with pytest.raises(GPFIFOError, match="stopped at an earlier error.*QMD_TYPE is 0"): dev.submit(cls.PushBuffer())


@pytest.mark.parametrize("words,match", [
  ([6 << 29], "opcode 6: not INC"),
  ([cls.method_header(cls.OP_INC, cls.SUBC_COMPUTE, 0x1234, 1), 0], "method 0x1234 of HOPPER_COMPUTE_A .subchannel 1. is not one NVK\\+NV uses"),
  ([cls.method_header(cls.OP_INC, 6, 0x300, 1), 0], "subchannel 6, which has no class bound"),
  ([cls.method_header(cls.OP_INC, 0, 0x90, 1), 0], "host method 0x90 is not one"),
  ([cls.method_header(cls.OP_INC, cls.SUBC_COMPUTE, cls.SET_OBJECT, 1), cls.HOPPER_DMA_COPY_A + 1], "SET_OBJECT class 0xc8b6 on subchannel 1: no object"),
  ([cls.method_header(cls.OP_INC, cls.SUBC_COMPUTE, cls.SEND_SIGNALING_PCAS2_B, 1), 3], "before any SEND_PCAS_A"),
  ([cls.method_header(cls.OP_INC, cls.SUBC_COPY, cls.LAUNCH_DMA, 1), 2 | (3 << 7)], "LAUNCH_DMA before OFFSET_IN_UPPER"),
  ([cls.method_header(cls.OP_INC, cls.SUBC_COMPUTE, cls.WAIT_FOR_IDLE, 3), 0], "says 3 data dwords, the segment has 1 left"),
])
def test_malformed_methods_are_caught(dev, words, match):
  dev.cmd.view(0x100000, 4 * len(words))[:] = np.array(words, dtype=np.uint32).tobytes()
  with pytest.raises(GPFIFOError, match=match): dev.write_gpfifo(cls.gpfifo_entry(dev.cmd.va + 0x100000, len(words)))


def test_bad_addresses_are_caught(dev):
  buf = dev.alloc(4096, what="test")
  gap = buf.va + buf.size  # the unmapped gap after every allocation
  with pytest.raises(GPFIFOError, match=f"copy source {gap:#x}\\+0x10 is not in memory mapped on the GPU"): dev.submit(cls.PushBuffer().copy(buf.va, gap, 16))
  dev2 = NVKDevice(MockNV("sm_90"), 0, "")
  with pytest.raises(GPFIFOError, match="copy destination .* past an allocation's end"): dev2.submit(cls.PushBuffer().copy(dev2.staging.va + dev2.staging.size - 8, dev2.staging.va, 16))
  dev3 = NVKDevice(MockNV("sm_90"), 0, "")
  with pytest.raises(GPFIFOError, match="the pushbuffer segment 0x.* is not in memory mapped"): dev3.write_gpfifo(cls.gpfifo_entry(0x7000_0000_00, 4))


def test_a_missing_semaphore_is_a_timeout_with_the_queue_state(dev, monkeypatch):
  monkeypatch.setattr(nvruntime, "WAIT_TIMEOUT_S", 0.2)
  pb = cls.PushBuffer().inc(cls.SUBC_COMPUTE, cls.WAIT_FOR_IDLE, 0).data()  # no timeline release: nothing will signal
  dev.cmd.view(0x100000, len(pb))[:] = pb
  dev.write_gpfifo(cls.gpfifo_entry(dev.cmd.va + 0x100000, len(pb) // 4))
  dev.timeline += 1
  with pytest.raises(RuntimeError, match="did not reach timeline value 2 .*: GPFIFO GPGet 2, GPPut 2, timeline semaphore 1 .want 2."): dev.synchronize()
  # the channel will never get there: later waits (a free() from the garbage collector) fail at once, not after the deadline
  monkeypatch.setattr(nvruntime, "WAIT_TIMEOUT_S", 3600.0)
  with pytest.raises(RuntimeError, match="did not reach timeline value 2 .*The device is unusable in this process"): dev.synchronize()
  dev.free(dev.alloc(4096, what="a buffer"))  # returns: freeing on a dead channel is safe


def test_a_stopped_channel_is_reported_at_once_with_rms_error(dev, monkeypatch):
  """RM writes the channel's error notifier (an NvNotification) when it stops a channel (an MMU fault here): the wait says
  so within a poll instead of waiting out NV_WAIT_TIMEOUT, and names what was submitted last."""
  monkeypatch.setattr(nvruntime, "WAIT_TIMEOUT_S", 30.0)
  dev.copy_gpu(dev.staging.va, dev.staging.va + 4096, 64)
  dev.synchronize()
  dev.timeline += 1  # a submission that will never finish
  ctypes.c_uint32.from_address(dev.notifier.cpu + 8).value = 31  # ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT
  ctypes.c_uint16.from_address(dev.notifier.cpu + 14).value = 0xFFFF
  with pytest.raises(RuntimeError, match=r"channel stopped: RM error 31 \(MMU fault.*last submitted: copy 64 bytes"): dev.synchronize()


def test_a_semaphore_acquire_nothing_releases_is_caught(dev):
  with pytest.raises(GPFIFOError, match="semaphore acquire at .* waits for >= 99, it is"): dev.submit(cls.PushBuffer().semaphore_acquire(dev.signals.va, 99))


def test_doorbell_and_ioctl_misuse():
  m = MockNV("sm_90")
  dev = NVKDevice(m, 0, "")
  with pytest.raises(OSError, match="rung with 0x1234, which is no channel's work-submit token"): m.write_doorbell(dev.doorbell_page + 0x90, 0x1234)
  with pytest.raises(OSError, match="the doorbell is NOTIFY_CHANNEL_PENDING"): m.write_doorbell(dev.doorbell_page + 0x80, dev.token)
  with pytest.raises(NVError, match="NV_ESC_RM_ALLOC .request 0xc020462b. failed with RM status 0x22 .NV_ERR_INVALID_CLASS."):
    dev.rm.alloc(dev.channel, 0xC7C0)  # AMPERE_COMPUTE_B: not a class of a Hopper GPU
  with pytest.raises(NVError, match="RM status 0x36 .NV_ERR_INVALID_OBJECT_PARENT."): dev.rm.alloc(dev.subdevice, cls.KEPLER_CHANNEL_GROUP_A,
                                                                                                   nv.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS())
  with pytest.raises(NVError, match="RM status 0x3a .NV_ERR_INVALID_PARAM_STRUCT."): dev.rm.alloc(dev.hdevice, cls.NV01_MEMORY_SYSTEM, nv.NV2080_ALLOC_PARAMETERS())
  with pytest.raises(NVError, match="UVM_CREATE_EXTERNAL_RANGE .request 0x49. failed with RM status 0x68 .NV_ERR_UVM_ADDRESS_IN_USE."):
    dev.uvm.call(nv.UVM_CREATE_EXTERNAL_RANGE, nv.UVM_CREATE_EXTERNAL_RANGE_PARAMS(base=dev.staging.va, length=4096), "a test range")
  with pytest.raises(OSError, match="escape 0x2b: the request says 4 bytes"): m.ioctl(dev.rm.ctl, nv.nv_request(nv.NV_ESC_RM_ALLOC, 4), nv.NVOS21_PARAMETERS())
  with pytest.raises(OSError, match="UVM ioctl 99 is not one MOCK\\+NV implements"): m.ioctl(dev.uvm.fd, 99, nv.UVM_FREE_PARAMS())


def test_arch_mismatch_and_ampere_qmd():
  with pytest.raises(RuntimeError, match="is sm_90, but DEV asks to compile for sm_86"): NVKDevice(MockNV("sm_90"), 0, "sm_86")
  assert NVKDevice(MockNV("sm_86"), 0, "").qmd_version == "V03_00"


def test_debug_2_prints_each_rm_object(capfd, monkeypatch):
  monkeypatch.setenv("DEBUG", "2")
  NVKDevice(MockNV("sm_90"), 0, "")
  out = capfd.readouterr().out
  assert "NVK: allocated the RM client: NV01_ROOT_CLIENT handle 0xc1d00001" in out and "allocated the GPFIFO channel: HOPPER_CHANNEL_GPFIFO_A handle 0xcf" in out


# ---- Tensor programs on DEV=MOCK+NV

def test_tensor_programs():
  with Context(DEV=MOCK):
    assert type(Device["NV"]).__name__ == "NVKDevice" and Device["NV"].iface.name == "MOCK"
    a_np, b_np = np.random.default_rng(0).standard_normal((2, 3, 17)).astype(np.float32), np.random.default_rng(1).standard_normal(17).astype(np.float32)
    a, b = Tensor(a_np), Tensor(b_np)
    np.testing.assert_allclose((a * b + 1).numpy(), a_np * b_np + 1, rtol=1e-6)
    np.testing.assert_allclose(a.sum(axis=2).numpy(), a_np.sum(axis=2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a.max(axis=(0, 1)).numpy(), a_np.max(axis=(0, 1)))
    np.testing.assert_allclose(a[1, 1:, 3:9].exp().numpy(), np.exp(a_np[1, 1:, 3:9]), rtol=1e-5)  # a view's offset
    x, y = Tensor(a_np[0]), Tensor(a_np[1].T)
    np.testing.assert_allclose((x @ y).numpy(), a_np[0] @ a_np[1].T, rtol=1e-5, atol=1e-5)
    assert Tensor.arange(10, dtype=dtypes.int32).cumsum().tolist() == list(np.cumsum(range(10)))
    assert (Tensor([1.0, 2.0]).contiguous() + 0).to("NV").contiguous().tolist() == [1.0, 2.0]


def test_tinyjit_replays_as_one_command_buffer():
  with Context(DEV=MOCK):
    n = Variable("n", 1, 16)
    @TinyJit
    def f(x: Tensor, y: Tensor, k) -> Tensor: return ((x * y).relu() + x).shrink(((0, k),)).sum()
    rng = np.random.default_rng(2)
    dev = Device["NV"]
    for i in range(6):
      x_np, y_np = rng.standard_normal(16).astype(np.float32), rng.standard_normal(16).astype(np.float32)
      k = 3 + i
      put = dev.put
      out = f(Tensor(x_np), Tensor(y_np), n.bind(k)).item()
      np.testing.assert_allclose(out, (np.maximum(x_np * y_np, 0) + x_np)[:k].sum(), rtol=1e-5, atol=1e-5)
    assert f.graph is not None and type(f.graph.graph).__name__ == "NVKGraph"  # QMDs and constant banks patched per replay
    GlobalCounters.reset()
    put = dev.put
    x, y = Tensor(np.ones(16, np.float32)).realize(), Tensor(np.ones(16, np.float32)).realize()
    put = dev.put
    f(x, y, n.bind(4)).realize()
    assert dev.put - put == 2  # the replay: its command buffer's GPFIFO entry and the timeline release, one doorbell


def test_mock_takes_cuda_only():
  with Context(DEV="MOCK+NV:PTX"), pytest.raises(RuntimeError, match="MOCK\\+NV runs kernels rendered by CUDA.*PTX is not supported"):
    (Tensor([1.0]) + 1).realize()


def test_plain_cubin_is_refused(dev, add_kernel):
  from tinygrad_backend_nv.compiler import NVRTCCompiler
  spec, _ = add_kernel
  with pytest.raises(ValueError, match="not compiled for MOCK\\+NV"): dev.runtime(spec.name, NVRTCCompiler("sm_90").compile(spec.src))


def test_copies_between_buffers(dev):
  a, b = dev.allocator.alloc(1 << 20), dev.allocator.alloc(1 << 20)
  data = np.random.default_rng(7).integers(0, 255, 1 << 20, dtype=np.uint8)
  dev.allocator.copyin(a, memoryview(data))
  dev.allocator.copy_device(b, a, 1 << 20)
  out = memoryview(bytearray(1 << 20))
  dev.allocator.copyout(out, b)
  assert bytes(out) == data.tobytes()
  ctypes.memset(dev.staging.cpu, 0, 16)  # the staging buffer is scratch: the result came through the copy engine each time


def test_nv_falls_back_to_the_driver_api_with_a_note(monkeypatch, capfd):
  """DEV=NV tries NVK first; where it can't open (here: the ioctls fail), the driver-API interface opens it, with one line
  on stderr saying why. Never the mock."""
  import tinygrad_backend_nv.iface as iface
  import tinygrad_backend_nv.runtime as runtime
  from tinygrad.device.plugin import Allocator, Compiled
  opened = []
  monkeypatch.setattr(iface, "nvk_present", lambda: True)
  monkeypatch.setattr(runtime, "open_cuda", lambda kind, index: opened.append((kind, index)) or Compiled(f"NV:{index}", Allocator(), None))
  monkeypatch.setattr(iface.NVK, "open", lambda self, path: (_ for _ in ()).throw(PermissionError(13, "Permission denied")))
  with Context(DEV="NV"):
    dev = Device["NV:3"]
  assert opened == [("NV", 3)] and type(dev) is Compiled
  err = capfd.readouterr().err
  assert "NV:3: NVK+NV did not open (NVError: open /dev/nvidiactl: open (request 0x0) failed with errno 13" in err and "using the CUDA driver API interface" in err
  Device._opened.pop("NV:3", None)


def test_a_kernels_globals_are_placed_and_its_constant_bank_relocated(dev):
  """The runtime uploads a kernel's global variables and writes their GPU addresses into constant bank 4 (where NVRTC's
  code reads them): left 0 they made the H200 fault (RM error 31) on every sinf/cosf kernel."""
  from tinygrad_backend_nv.compiler import NVRTCCompiler
  from tinygrad_backend_nv.nvruntime import NVKProgram
  src = 'extern "C" __device__ unsigned flag = 7;\nextern "C" __global__ void __launch_bounds__(32) s(unsigned* a) { a[threadIdx.x] = flag; }'
  dev.iface.register_function(b"", "s", lambda *a, **kw: None)  # the mock needn't run it: only its constant bank is read
  prg = NVKProgram(dev, "s", NVRTCCompiler("sm_90").compile(src))
  va, size = prg.cbufs[4]
  bank = memoryview(bytearray(size))
  dev.download(bank, nvruntime.GPUMem(va, size, None, None))
  glob = int.from_bytes(bank[:8], "little")
  assert glob != 0 and glob != va
  value = memoryview(bytearray(4))
  dev.download(value, nvruntime.GPUMem(glob, 4, None, None))
  assert int.from_bytes(value, "little") == 7


def test_a_minimum_carveout_that_cannot_hold_the_block_is_refused(dev, add_kernel):
  """The SM may run a launch with any shared-memory carve-out from the QMD's min to max: min below one block's shared
  memory trapped on the H200 (RM error 13); the mock refuses it the same way."""
  spec, prg, bufs = _setup(dev, add_kernel)
  with pytest.raises(GPFIFOError, match="SM_CONFIG_SHARED_MEM_SIZE min/max/target 3/58/3 .* block of 17408 bytes"):
    _launch_qmd(dev, spec, prg, bufs, {"SHARED_MEMORY_SIZE": 17408, "MIN_SM_CONFIG_SHARED_MEM_SIZE": 3, "TARGET_SM_CONFIG_SHARED_MEM_SIZE": 3})


def test_free_waits_for_queued_work_before_unmapping(dev, monkeypatch):
  """UVM_FREE unmaps at once; a graph replay still running on freed intermediates faulted the H200 (RM error 31). free()
  waits for the queue first, as cuMemFree does."""
  m = dev.alloc(4096, what="a buffer")
  order: list = []
  real_call = dev.uvm.call
  monkeypatch.setattr(dev, "synchronize", lambda before=None: order.append("synchronize"))
  monkeypatch.setattr(dev.uvm, "call", lambda req, *a, **kw: (order.append(req), real_call(req, *a, **kw))[1])
  dev.free(m)
  assert order[0] == "synchronize" and nv.UVM_FREE in order[1:]


def test_the_mock_writes_the_error_notifier_when_it_stops_a_channel(dev):
  """As RM does: a copy from an unmapped address stops the channel with an MMU fault (31) in its error notifier, which the
  runtime's waits read."""
  assert dev.channel_error() is None
  buf = dev.alloc(4096, what="a buffer")
  with pytest.raises(GPFIFOError, match="not in memory mapped"): dev.submit(cls.PushBuffer().copy(buf.va, buf.va + buf.size, 16))
  assert (err := dev.channel_error()) is not None and err.startswith("RM error 31 (MMU fault")


def test_graph_updates_never_wait_and_reach_each_copy_before_it_is_sent(dev, add_kernel, monkeypatch):
  """An update (a decode step's new position, each token) only records the launch: no wait for the GPU. Each of the graph's two
  QMD copies is patched just before the replay that sends it, after that copy's previous replay is done; an empty grid is left
  out of the copy's command buffer and put back when it is not empty again."""
  from tinygrad_backend_nv.nvgraph import NVKGraph
  spec, prg, (c, a, b) = _setup(dev, add_kernel)
  gs, ls = spec.launch_dims({})
  other = dev.allocator.alloc(64 * 4)
  g = NVKGraph(dev, [KernelLaunch(prg, (c, a, b), gs, ls)])
  g()
  dev.synchronize()
  np.testing.assert_equal(_out(dev, c), np.arange(64) + 100)
  events: list[tuple] = []
  real_sync, real_patch = dev.synchronize, type(prg).patch_params
  monkeypatch.setattr(dev, "synchronize", lambda before=None: (events.append(("wait", before)), real_sync(before))[1])
  monkeypatch.setattr(type(prg), "patch_params", lambda self, slot, bufs, vals: (events.append(("patch", slot)), real_patch(self, slot, bufs, vals))[1])
  g.update(0, KernelLaunch(prg, (other, a, c), gs, ls))  # other = a + c (c holds a + b): 2a + 100
  assert events == [], "an update waits for nothing and writes nothing"
  for r in range(3):  # replays 1, 2, 3: copies 1, 0, 1; each copy patched once, after its own previous replay is done
    copy = g.replays % 2
    want = g.done_at[copy]
    events.clear()
    g()
    assert events[0] == ("wait", want), events
    assert events[1:] == ([("patch", g.slots.cpu + g._slot(copy, 0))] if r < 2 else []), events
  dev.synchronize()
  np.testing.assert_equal(_out(dev, other), 2 * np.arange(64) + 100)
  g.update(0, KernelLaunch(prg, (other, a, c), (0, 1, 1), ls))  # an empty grid: nothing launched, in both copies
  dev.allocator.copyin(other, memoryview(bytes(64 * 4)))
  for _ in range(2): g()
  dev.synchronize()
  np.testing.assert_equal(_out(dev, other), np.zeros(64))
  g.update(0, KernelLaunch(prg, (other, a, b), gs, ls))
  for _ in range(2):
    dev.allocator.copyin(other, memoryview(bytes(64 * 4)))
    g()
    dev.synchronize()
    np.testing.assert_equal(_out(dev, other), np.arange(64) + 100)
