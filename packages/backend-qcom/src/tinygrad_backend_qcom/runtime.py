"""The CL device: any OpenCL device through pyopencl (`DEV=CL`, `CL:1`, ...), running QCOMCL kernels.

One context and one in-order command queue (with profiling, for kernel times) per instance. Buffers are cl.Buffer
objects; views are sub-buffers where the offset meets the device's alignment, and copies otherwise go through the
queue, so kernels and copies run in the order they were issued without explicit waits.

Image parameters (IMAGE=1/2: images.py): the buffer stays the tensor's memory, and each launch copies it into a cl.Image
(RGBA, FLOAT or HALF_FLOAT, kept with the view for the next launch) before the kernel, and a written image back after
it, on the same queue. On Adreno an image aliases its buffer's memory with a pitch; PoCL has no
cl_khr_image2d_from_buffer, so here images are device-side copies.
"""
from __future__ import annotations

from typing import Any

from tinygrad.device.plugin import Allocator, Compiled

from tinygrad_backend_qcom.compiler import build, split_images
from tinygrad_backend_qcom.opencl import cl_devices, cl_status, device_info, import_pyopencl


class CLAllocator(Allocator):
  """cl.Buffer handles. Byte ranges of a buffer (views) are (buffer, offset) pairs resolved at launch."""

  def __init__(self, dev: CLDevice):
    super().__init__()
    self.dev = dev

  def _alloc(self, size: int, options: Any) -> CLView:
    cl = import_pyopencl()
    try: return CLView(cl.Buffer(self.dev.ctx, cl.mem_flags.READ_WRITE, max(size, 1)), 0, size)
    except cl.MemoryError as e: raise MemoryError(f"{self.dev.device}: could not allocate {size} bytes ({e})") from e

  def _free(self, opaque: CLView, size: int, options: Any) -> None:
    for img in (opaque.images or {}).values(): img.release()
    opaque.buf.release()

  def view(self, opaque: CLView, offset: int, size: int) -> CLView: return CLView(opaque.buf, opaque.offset + offset, size)

  def _copyin(self, dest: CLView, src: memoryview) -> None:
    if src.nbytes == 0: return
    cl = import_pyopencl()
    host = bytes(src) if src.readonly else src  # the queue reads it before this returns (is_blocking)
    cl.enqueue_copy(self.dev.queue, dest.buf, host, dst_offset=dest.offset, is_blocking=True)

  def _copyout(self, dest: memoryview, src: CLView) -> None:
    if dest.nbytes == 0: return
    cl = import_pyopencl()
    cl.enqueue_copy(self.dev.queue, dest, src.buf, src_offset=src.offset, is_blocking=True)


class CLView:
  """A byte range of a cl.Buffer."""
  __slots__ = ("buf", "offset", "size", "sub", "images")

  def __init__(self, buf: Any, offset: int, size: int):
    self.buf, self.offset, self.size, self.sub = buf, offset, size, None
    self.images: dict[tuple[int, int, str], Any] | None = None  # (height, width, 'f'/'h') -> cl.Image: the image copies of this range


class CLProgram:
  """A kernel built from a program binary (compiler.CLCompiler). Launch: global size = work-groups x local size."""

  def __init__(self, dev: CLDevice, name: str, lib: bytes):
    self.dev, self.name = dev, name
    self.images, lib = split_images(lib)
    self.program = build(dev.ctx, dev.cl_device, binary=lib)
    self.kernel = getattr(self.program, name)
    self.max_local = self.kernel.get_work_group_info(import_pyopencl().kernel_work_group_info.WORK_GROUP_SIZE, dev.cl_device)

  def _arg(self, v: CLView) -> Any:
    if v.offset == 0: return v.buf
    # a view that doesn't start at the buffer's start: an OpenCL sub-buffer (its origin must meet the device's alignment),
    # made once per view and kept with it
    if v.sub is None:
      align = self.dev.info["base_align"]
      if v.offset % align:
        raise RuntimeError(f"kernel {self.name}: a buffer view at byte offset {v.offset} is not aligned to {align} bytes, which "
                           f"{self.dev.info['name']} requires for sub-buffers; make the tensor contiguous first (.contiguous())")
      v.sub = v.buf.get_sub_region(v.offset, max(v.size, 1))
    return v.sub

  def _image(self, v: CLView, height: int, width: int, fmt: str) -> Any:
    """The cl.Image copy of view v with the buffer's current contents (copied on the queue)."""
    cl = import_pyopencl()
    if height * width * 4 * (2 if fmt == "h" else 4) != v.size:
      raise RuntimeError(f"kernel {self.name}: an image of {height}x{width} texels doesn't match its buffer of {v.size} bytes")
    if v.images is None: v.images = {}
    if (img := v.images.get((height, width, fmt))) is None:
      ctype = cl.channel_type.HALF_FLOAT if fmt == "h" else cl.channel_type.FLOAT
      img = v.images[(height, width, fmt)] = cl.create_image(self.dev.ctx, cl.mem_flags.READ_WRITE, cl.ImageFormat(cl.channel_order.RGBA, ctype),
                                                        shape=(width, height))
    cl.enqueue_copy(self.dev.queue, img, v.buf, offset=v.offset, origin=(0, 0), region=(width, height))
    return img

  def __call__(self, *bufs: CLView, global_size: tuple[int, ...] = (1, 1, 1), local_size: tuple[int, ...] = (1, 1, 1),
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    import numpy as np  # only to pass int32 scalars to pyopencl
    cl = import_pyopencl()
    groups = (tuple(global_size) + (1, 1, 1))[:3]
    local = (tuple(local_size) + (1, 1, 1))[:3]
    if groups[0] * groups[1] * groups[2] == 0: return 0.0 if wait else None
    if local[0] * local[1] * local[2] > self.max_local:
      raise RuntimeError(f"kernel {self.name}: local size {local} exceeds its limit of {self.max_local} work-items per work-group "
                         f"on {self.dev.info['name']}; use a smaller LOCAL_SIZE (e.g. DEV=CL:QCOMCL:{self.dev.arch},LOCAL_SIZE=64)")
    images = {pos: (self._image(bufs[pos], h, w, fmt), access, h, w) for pos, access, h, w, fmt in self.images}
    for i, b in enumerate(bufs): self.kernel.set_arg(i, images[i][0] if i in images else self._arg(b))
    for j, v in enumerate(vals): self.kernel.set_arg(len(bufs) + j, np.int32(v))
    total = tuple(g * lo for g, lo in zip(groups, local))
    event = cl.enqueue_nd_range_kernel(self.dev.queue, self.kernel, total, local)
    for pos, (img, access, h, w) in images.items():  # a written image back into its buffer
      if access == "w": cl.enqueue_copy(self.dev.queue, bufs[pos].buf, img, origin=(0, 0), region=(w, h), offset=bufs[pos].offset)
    if not wait: return None
    event.wait()
    return (event.profile.end - event.profile.start) * 1e-9


class CLDevice(Compiled):
  """One OpenCL device: `CL` is the first of all platforms' devices, `CL:1` the next (see opencl.cl_devices)."""

  def __init__(self, index: int = 0):
    count, why = cl_status()
    if why is not None: raise RuntimeError(f"OpenCL is not available: {why}")
    if not 0 <= index < count: raise RuntimeError(f"there is no CL device {index}: this machine has {count} OpenCL device(s) (CL:0..CL:{count - 1})")
    cl = import_pyopencl()
    self.cl_device = cl_devices()[index]
    self.ctx = cl.Context(devices=[self.cl_device])
    self.queue = cl.CommandQueue(self.ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    self.info = {**device_info(self.cl_device), "base_align": max(int(self.cl_device.mem_base_addr_align) // 8, 1)}
    from tinygrad_backend_qcom.opencl import generic_arch
    self.arch = generic_arch(self.cl_device)
    super().__init__("CL" if index == 0 else f"CL:{index}", CLAllocator(self), self._load)

  def _load(self, name: str, lib: bytes) -> CLProgram: return CLProgram(self, name, lib)

  def synchronize(self) -> None: self.queue.finish()

  def __repr__(self) -> str: return f"<CLDevice {self.device} {self.info['platform']}: {self.info['name']}>"


def open_cl(index: int) -> CLDevice: return CLDevice(index)
