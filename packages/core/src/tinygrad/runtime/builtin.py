"""Core's own backends (PYTHON, NULL and DISK), registered through the same pluggy hooks as third-party plugins."""
from __future__ import annotations

from collections.abc import Callable

from tinygrad.device.plugin import CollectiveSpec, DeviceSpec, RegisterDevice, RegisterRenderer, RendererSpec, hookimpl
from tinygrad.runtime.disk import open_disk
from tinygrad.runtime.null import open_null
from tinygrad.runtime.python import PythonRenderer, open_python


@hookimpl
def register_devices(register: RegisterDevice) -> None:
  # the default of last resort (always available); its interpreter is no renderer for NULL
  register(DeviceSpec("PYTHON", {"": open_python}, package="tinygrad", default_rank=1000, lends_renderers=False))
  # NULL has no renderer of its own: the registry lets it compile with every installed one
  register(DeviceSpec("NULL", {"": open_null}, runs_kernels=False, package="tinygrad", foreign_renderers=True))
  # DISK:path, a file read and written with pread/pwrite: storage only (the registry routes DISK:path names to it)
  register(DeviceSpec("DISK", {"": open_disk}, runs_kernels=False, package="tinygrad", path_instances=True))


@hookimpl
def register_renderers(register: RegisterRenderer) -> None:
  register(RendererSpec(device="PYTHON", name="PYTHON", make=PythonRenderer, default=True, archs=("*",), package="tinygrad"))


def _make_mpi(init):
  from tinygrad.runtime.mpi import MPICommunicator  # mpi4py is optional: imported when a group picks MPI
  return MPICommunicator(init)


def _mpi_available() -> str | None:
  from tinygrad.runtime.mpi import mpi_available
  return mpi_available()


@hookimpl
def register_collectives(register: Callable[..., None]) -> None:
  # MPI moves host memory, so it serves every device (GPU buffers are staged through the host)
  register(CollectiveSpec("mpi", _make_mpi, devices=("*",), available=_mpi_available, package="mpi4py"))
