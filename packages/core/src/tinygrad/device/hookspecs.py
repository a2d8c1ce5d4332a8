"""The plugin contract: everything a backend can contribute, one hook per capability.

A backend is an ordinary Python distribution that declares an entry point in the group
`tinygrad.backends` pointing at a module (or object) with `@hookimpl`-decorated functions:

    # pyproject.toml
    [project.entry-points."tinygrad.backends"]
    mybackend = "my_backend.plugin"

    # my_backend/plugin.py
    from tinygrad.device.plugin import hookimpl, DeviceSpec, RendererSpec

    @hookimpl
    def register_devices(register):
      register(DeviceSpec(name="MYDEV", interfaces={"": open_mydev}, count=lambda: 1))

    @hookimpl
    def register_renderers(register):
      register(RendererSpec(device="MYDEV", name="C", make=lambda target: MyRenderer(target), default=True))

Each hook receives a `register` callback and calls it once per thing it offers. Core's own devices
(PYTHON, NULL, DISK) are registered through these same hooks. Plugins load lazily, on the first
device lookup; `TINYGRAD_PLUGINS=name1,name2` limits which entry points load.
See `tinygrad.device.plugin` for the types (DeviceSpec, RendererSpec, TensorCore) and
`examples/plugin-example/` for a complete out-of-tree backend.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
  from tinygrad.device.plugin import DeviceSpec, RendererSpec
  from tinygrad.renderer import TensorCore

PROJECT = "tinygrad"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_devices(register: Callable[[DeviceSpec], None]) -> None:
  """Register devices: `register(DeviceSpec(...))`, each with its interfaces (how to open the runtime)."""


@hookspec
def register_renderers(register: Callable[[RendererSpec], None]) -> None:
  """Register renderers: `register(RendererSpec(...))`, each with the device it serves, its archs and its compiler."""


@hookspec
def register_tensor_cores(register: Callable[[str, Sequence[TensorCore]], None]) -> None:
  """Register tensor-core specs: `register(arch_pattern, [TensorCore(...), ...])`; arch_pattern is an fnmatch pattern."""


@hookspec
def register_collectives(register: Callable[..., None]) -> None:
  """Register multi-process collectives backends: `register(CollectiveSpec(...))` (see tinygrad.device.collectives)."""
