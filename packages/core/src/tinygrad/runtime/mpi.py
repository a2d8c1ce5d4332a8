"""The MPI collectives backend (mpi4py over any MPI, e.g. the `mpich` wheel): one process per rank, started by
`mpirun -n N`. MPI works on host memory: a CPU buffer is handed over in place (the allocator's memoryview), other
devices' buffers go through a host copy. MPI finishes each call before returning, so later kernels see the result."""
from __future__ import annotations

from typing import Any

from tinygrad.device.collectives import CommInit, Communicator, ReduceOp
from tinygrad.device.registry import Device
from tinygrad.device.runtime import Buffer
from tinygrad.dtype import DType, dtypes

INSTALL_HINT = "pip install mpi4py mpich (or `uv sync` in the tinygrad workspace: its dev group has both)"


def mpi_available() -> str | None:
  try:
    import mpi4py  # noqa: F401  only asks whether it is installed; importing mpi4py.MPI would initialise MPI
  except ImportError:
    return f"the MPI backend needs mpi4py and an MPI library: {INSTALL_HINT}"
  return None


def _mpi() -> Any:
  try:
    from mpi4py import MPI
  except ImportError as e:
    raise RuntimeError(f"tinygrad.distributed: backend 'mpi' needs mpi4py and an MPI library ({e}): {INSTALL_HINT}") from e
  return MPI


def _mpi_type(MPI: Any, dtype: DType) -> Any:
  table = {dtypes.float32: MPI.FLOAT, dtypes.float64: MPI.DOUBLE, dtypes.int8: MPI.INT8_T, dtypes.int16: MPI.INT16_T,
           dtypes.int32: MPI.INT32_T, dtypes.int64: MPI.INT64_T, dtypes.uint8: MPI.UINT8_T, dtypes.uint16: MPI.UINT16_T,
           dtypes.uint32: MPI.UINT32_T, dtypes.uint64: MPI.UINT64_T, dtypes.bool: MPI.C_BOOL}
  if (t := table.get(dtype)) is None:
    raise TypeError(f"MPI has no reduction type for {dtype}: cast the tensor first (e.g. .float()), or use NCCL for GPU tensors")
  return t


def host_view(buf: Buffer) -> tuple[memoryview, bool]:
  """The buffer's bytes in host memory, and whether that is the buffer itself (False: a copy, write it back with copyin)."""
  dev = Device[buf.device]
  dev.synchronize()  # kernels still running must have written it
  if hasattr(dev.allocator, "as_memoryview"): return dev.allocator.as_memoryview(buf.opaque)[:buf.nbytes], True
  staging = memoryview(bytearray(buf.nbytes))
  buf.copyout(staging)
  return staging, False


class MPICommunicator(Communicator):
  name = "mpi"

  def __init__(self, init: CommInit):
    self.MPI = MPI = _mpi()
    self.comm = MPI.COMM_WORLD
    if (self.comm.Get_rank(), self.comm.Get_size()) != (init.rank, init.world_size):
      raise RuntimeError(f"tinygrad.distributed: rank {init.rank} of {init.world_size} (from the arguments or RANK/WORLD_SIZE) disagrees with "
                         f"MPI's rank {self.comm.Get_rank()} of {self.comm.Get_size()}: start the processes with `mpirun -n N`, "
                         "and leave RANK/WORLD_SIZE unset (MPI knows them)")
    self.rank, self.world_size = init.rank, init.world_size

  def _op(self, op: ReduceOp) -> Any: return {"sum": self.MPI.SUM, "prod": self.MPI.PROD, "max": self.MPI.MAX, "min": self.MPI.MIN}[op]

  def _run(self, out: Buffer, inp: Buffer, call: Any) -> None:
    """call(send_spec, recv_spec): [memory, MPI type] (mpi4py counts the elements), send is IN_PLACE when out is inp;
    a staged output is copied back afterwards."""
    t = _mpi_type(self.MPI, out.dtype)
    out_mv, direct = host_view(out)
    if inp is out: send: Any = self.MPI.IN_PLACE
    else: send = [host_view(inp)[0], t]
    call(send, [out_mv, t])
    if not direct: out.copyin(out_mv)

  def all_reduce(self, out: Buffer, inp: Buffer, op: ReduceOp) -> None:
    self._run(out, inp, lambda s, r: self.comm.Allreduce(s, r, op=self._op(op)))

  def all_gather(self, out: Buffer, inp: Buffer) -> None:
    self._run(out, inp, lambda s, r: self.comm.Allgather(s, r))

  def reduce_scatter(self, out: Buffer, inp: Buffer, op: ReduceOp) -> None:
    self._run(out, inp, lambda s, r: self.comm.Reduce_scatter_block(s, r, op=self._op(op)))

  def broadcast(self, out: Buffer, inp: Buffer, root: int) -> None:
    t = _mpi_type(self.MPI, out.dtype)
    out_mv, direct = host_view(out)
    if self.rank == root and inp is not out: out_mv[:] = host_view(inp)[0]
    self.comm.Bcast([out_mv, t], root=root)
    if not direct: out.copyin(out_mv)

  def barrier(self) -> None: self.comm.Barrier()


class MPIBootstrap:
  """Bytes from one rank to all through MPI (for NCCL's unique id when the job was started by mpirun)."""

  def __init__(self) -> None: self.comm = _mpi().COMM_WORLD

  def broadcast_bytes(self, key: str, data: bytes | None, root: int = 0) -> bytes:
    out = self.comm.bcast(data, root=root)
    assert isinstance(out, bytes), f"rank {root} sent no bytes for {key!r}"
    return out
