"""Finds backends (pluggy entry points in group `tinygrad.backends`), resolves DEV targets against what they
registered, and opens device instances: `Device["CPU"]`, `Device["CUDA:1"]`, `Device.DEFAULT`."""
from __future__ import annotations

import contextlib
import fnmatch
import os
import threading
from dataclasses import dataclass
from functools import cached_property
from importlib import metadata
from typing import Any

import pluggy

from tinygrad.device import hookspecs
from tinygrad.device.devstring import Target, closest, instance_name, parse_dev, parse_instance, unknown_name_error
from tinygrad.device.plugin import CollectiveSpec, DeviceSpec, RendererSpec, TensorCore
from tinygrad.device.runtime import Compiled
from tinygrad.helpers import DEBUG, DEV
from tinygrad.renderer import Renderer

ENTRY_POINT_GROUP = "tinygrad.backends"
BUILTIN_PLUGIN = "tinygrad.runtime.builtin"
# where a known backend comes from, for "not installed" errors
KNOWN_PACKAGES = {"CPU": "tinygrad-backend-cpu", "CUDA": "tinygrad-backend-nv", "NV": "tinygrad-backend-nv",
                  "AMD": "tinygrad-backend-amd", "QCOM": "tinygrad-backend-qcom"}
class DeviceNotFound(KeyError, ModuleNotFoundError, RuntimeError):
  """An unknown or unavailable device, renderer, arch or interface: a KeyError (a name looked up in the registry), and the
  ModuleNotFoundError (unknown device) and RuntimeError (unknown renderer) that tinygrad raises for the same mistakes."""
  def __str__(self) -> str: return str(self.args[0])


@dataclass(frozen=True)
class Resolved:
  """A DEV target matched to what is installed."""
  target: Target
  device: DeviceSpec
  renderer: RendererSpec
  arch: str


class Registry:
  """All registered devices, renderers and tensor cores. Plugins are loaded on first use."""

  def __init__(self) -> None:
    self.devices: dict[str, DeviceSpec] = {}
    self.renderers: list[RendererSpec] = []
    self.tensor_core_specs: list[tuple[str, list[TensorCore]]] = []
    self.collectives: list[CollectiveSpec] = []  # multi-process backends (tinygrad.distributed)
    self.plugin_errors: dict[str, str] = {}
    self.plugin_names: list[str] = []
    self._loaded = False

  # ---- loading
  def load(self) -> Registry:
    if self._loaded: return self
    self._loaded = True
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    import importlib
    pm.register(importlib.import_module(BUILTIN_PLUGIN), name="core")
    self.plugin_names.append("core")
    allowed = os.environ.get("TINYGRAD_PLUGINS")
    allow = None if allowed is None else {x.strip() for x in allowed.split(",") if x.strip()}
    # TINYGRAD_PLUGIN_MODULES=pkg.plugin,...: plugin modules to load without installing a distribution (a source
    # checkout on a machine that can't build wheels); they register exactly like entry points
    for mod in filter(None, (m.strip() for m in os.environ.get("TINYGRAD_PLUGIN_MODULES", "").split(","))):
      try:
        pm.register(importlib.import_module(mod), name=mod)
        self.plugin_names.append(mod)
      except Exception as e:  # noqa: BLE001  reported like a broken entry point
        self.plugin_errors[mod] = f"{type(e).__name__}: {e}"
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
      if ep.value.split(":")[0] in self.plugin_names: continue
      if ep.name == "core" or (allow is not None and ep.name not in allow): continue
      try:
        pm.register(ep.load(), name=ep.name)
        self.plugin_names.append(ep.name)
      except Exception as e:  # noqa: BLE001  a broken plugin must not break the others; it is reported
        self.plugin_errors[ep.name] = f"{type(e).__name__}: {e}"
        if DEBUG >= 1: print(f"tinygrad: plugin {ep.name!r} failed to load: {e}")
    pm.hook.register_devices(register=self._add_device)
    pm.hook.register_renderers(register=self.renderers.append)
    pm.hook.register_tensor_cores(register=lambda pattern, tcs: self.tensor_core_specs.append((pattern, list(tcs))))
    pm.hook.register_collectives(register=self.collectives.append)
    return self

  def _add_device(self, spec: DeviceSpec) -> None:
    name = spec.name.upper()
    if name in self.devices: raise ValueError(f"device {name} registered twice (by {self.devices[name].package!r} and {spec.package!r})")
    self.devices[name] = spec

  # ---- lookups
  def device_spec(self, name: str) -> DeviceSpec:
    self.load()
    name = name.upper()
    if name in self.devices: return self.devices[name]
    hint = f"(install {KNOWN_PACKAGES[name]} to get it)" if name in KNOWN_PACKAGES else ""
    raise DeviceNotFound(unknown_name_error("device", name, self.devices, hint))

  def renderers_for(self, device: str) -> list[RendererSpec]:
    self.load()
    if (spec := self.devices.get(device.upper())) is not None and spec.foreign_renderers:
      return [r for r in self.renderers if self._lends(r.device)]
    return [r for r in self.renderers if r.device == device.upper()]

  def _lends(self, device: str) -> bool: return (spec := self.devices.get(device)) is None or spec.lends_renderers

  def split_path_instance(self, name: str) -> tuple[str, str] | None:
    """'disk:/tmp/x.bin' -> ('DISK', '/tmp/x.bin'); None when `name` is not PATHDEVICE:path (DeviceSpec.path_instances)."""
    kind, sep, path = name.partition(":")
    if not (sep and path): return None
    spec = self.load().devices.get(kind.strip().upper())
    return (kind.strip().upper(), path) if spec is not None and spec.path_instances else None

  def default_device(self) -> str:
    """The available device of lowest `default_rank`."""
    ranked = sorted((spec.default_rank, name) for name, spec in self.load().devices.items() if spec.default_rank is not None)
    for _, name in ranked:
      if self._device_usable(name): return name
    raise DeviceNotFound(f"no device is available to be the default; installed: {', '.join(sorted(self.devices))}")

  def tensor_cores(self, arch: str) -> list[TensorCore]:
    self.load()
    return [tc for pattern, tcs in self.tensor_core_specs if fnmatch.fnmatchcase(arch, pattern) for tc in tcs]

  def resolve(self, target: Target) -> Resolved:
    """Match a parsed DEV target to an installed device, renderer and arch; clear errors otherwise."""
    dev = self.device_spec(target.device)
    candidates = self.renderers_for(dev.name)
    if not candidates: raise DeviceNotFound(f"device {dev.name} has no renderer installed")
    if target.renderer:
      named = [r for r in candidates if r.name.upper() == target.renderer]
      if not named:
        names = sorted({r.name for r in candidates})
        hint = ""
        other = [r for r in self.renderers if r.name.upper() == target.renderer]
        if other:
          null = [name for name, spec in self.devices.items() if spec.foreign_renderers]
          compile_only = f" or {null[0]}:{target.renderer}" if null and self._lends(other[0].device) and dev.name not in null else ""
          hint = f"({target.renderer} renders for {other[0].device}; use DEV={other[0].device}:{target.renderer}{compile_only})"
        raise DeviceNotFound(unknown_name_error(f"renderer for {dev.name}", target.renderer, names, hint))
      candidates = named
    else:
      # NULL with no renderer named compiles like the device that runs by default (the CPU here, not a GPU it lacks)
      candidates = sorted(candidates, key=lambda r: (not r.default, not self._device_usable(r.device), self._device_rank(r.device)))
    if target.arch:
      accepting = [r for r in candidates if r.accepts(target.arch)]
      if not accepting:
        archs = sorted({a for r in candidates if not callable(r.archs) for a in r.archs})
        near = closest(target.arch, archs)
        raise DeviceNotFound(f"unknown arch {target.arch!r} for {dev.name}:{candidates[0].name}" +
                             (f"; did you mean {near!r}?" if near else "") + f" accepted: {', '.join(archs) or 'see the backend docs'}")
      # a renderer that names the arch outright wins over one that takes any arch (NULL:LLVM:gfx942 is AMD's LLVM, not the CPU's '*')
      renderer = sorted(accepting, key=lambda r: callable(r.archs) or target.arch not in r.archs)[0]
    else:
      renderer = candidates[0]
    return Resolved(target, dev, renderer, target.arch or renderer.default_arch())

  def _device_usable(self, device: str) -> bool:
    spec = self.devices.get(device)
    try: return spec is not None and spec.available() is None
    except Exception:  # noqa: BLE001  a failing availability check means "not usable here"
      return False

  def _device_rank(self, device: str) -> int:
    spec = self.devices.get(device)
    return spec.default_rank if spec is not None and spec.default_rank is not None else 1 << 30


registry = Registry()


class _Device:
  """`Device[name]` opens (once) and returns the device instance; `Device.DEFAULT` is the instance that
  tensors go to when no device is given: the first target of DEV, else the best available device."""

  def __init__(self) -> None:
    self._opened: dict[str, Compiled] = {}
    self._renderers: dict[tuple, Renderer] = {}
    # opening is serialized: a device opened on a thread (open_early) while this one asks for it is opened once
    self._open_lock = threading.RLock()

  @property
  def registry(self) -> Registry: return registry.load()

  def canonicalize(self, name: str | None) -> str:
    if name is None: return self.DEFAULT
    if (pathdev := registry.split_path_instance(name)) is not None: return f"{pathdev[0]}:{pathdev[1]}"
    dev, idx = parse_instance(name)
    return instance_name(dev, idx)

  def targets(self) -> tuple[Target, ...]:
    return parse_dev(DEV.value) if DEV.value else ()

  @property
  def DEFAULT(self) -> str:
    if (targets := self.targets()): return instance_name(targets[0].device, targets[0].index or 0)
    return self.registry.default_device()

  def target_for(self, device_kind: str) -> Target:
    """The DEV target that configures `device_kind` (its renderer and arch), or a bare one."""
    for t in self.targets():
      if t.device == device_kind: return t
    return Target(device_kind)

  def _instance_key(self, key: str) -> str:
    """Instances opened through an interface that DEV names are kept apart: DEV=QCOM never reuses what MOCKKGSL+QCOM opened,
    nor DEV=AMD what MOCKKFD+AMD did (and switching DEV back finds the mock's instance again)."""
    for t in self.targets():
      if t.interface and t.device == key.partition(":")[0]: return f"{t.interface}+{key}"
    return key

  def __getitem__(self, name: str) -> Compiled:
    key = self.canonicalize(name)
    if (ckey := self._instance_key(key)) in self._opened: return self._opened[ckey]
    with self._open_lock:
      if ckey in self._opened: return self._opened[ckey]
      return self._open(key, ckey)

  def open_early(self, name: str) -> threading.Thread:
    """Start opening a device on a thread (a GPU's context takes a while to make, the driver's calls don't hold the GIL) while
    this one does other work; Device[name] later waits for it. A failure is left for Device[name] to raise, from its caller."""
    self.registry  # noqa: B018  (plugins loaded here: the registry is not loaded by two threads at once)
    def open_quietly() -> None:
      with contextlib.suppress(Exception): self[name]
    (t := threading.Thread(target=open_quietly, name="tinygrad-open", daemon=True)).start()
    return t

  def _open(self, key: str, ckey: str) -> Compiled:
    if (pathdev := registry.split_path_instance(key)) is not None:  # DISK:path (DeviceSpec.path_instances)
      self._opened[key] = self.registry.device_spec(pathdev[0]).interfaces[""](0, Target(pathdev[0], arch=pathdev[1]))
      return self._opened[key]
    kind, index = parse_instance(key)
    spec = self.registry.device_spec(kind)
    target = self.target_for(kind)
    if target.interface and target.interface not in spec.interfaces:
      raise DeviceNotFound(unknown_name_error(f"interface for {kind}", target.interface, [i for i in spec.interfaces if i]))
    # available() speaks for the hardware; a mock interface (DeviceSpec.mock_interfaces: MOCKKFD+AMD, MOCKKGSL+QCOM) is not
    # gated by it, and is opened only when DEV names it: never tried by default
    if target.interface not in spec.mock_interfaces and (why := spec.available()) is not None:
      raise RuntimeError(f"device {key} is not available here: {why}")
    iface_names = [target.interface] if target.interface else [i for i in spec.interfaces if i not in spec.mock_interfaces]
    errors = []
    for iface in iface_names:
      if iface not in spec.interfaces:
        raise DeviceNotFound(unknown_name_error(f"interface for {kind}", iface, [i for i in spec.interfaces if i]))
      try:
        self._opened[ckey] = spec.interfaces[iface](index, target)
        return self._opened[ckey]
      except Exception as e:  # noqa: BLE001  try the next interface, report all if none opens
        errors.append(f"{iface or 'default'}: {type(e).__name__}: {e}")
    raise RuntimeError(f"could not open device {key}: " + "; ".join(errors))

  def renderer(self, device: str) -> Renderer:
    """The renderer that compiles for a device instance under the current DEV."""
    if registry.split_path_instance(device) is not None:  # DISK:path (DeviceSpec.path_instances)
      raise RuntimeError(f"{device} only stores bytes and runs no kernels, but this computation needs a kernel there. "
                         "Move the tensor to a compute device first (t.to('CPU'), or t.to(None) for the default one), then compute on it")
    kind, _ = parse_instance(self.canonicalize(device))
    target = self.target_for(kind)
    key = (kind, target.renderer, target.arch, target.opts, target.interface)
    if key not in self._renderers:
      resolved = self.registry.resolve(target)
      # the interface too: a mock interface's renderer may record what its mock needs to run the kernel (MOCKKFD+AMD)
      self._renderers[key] = resolved.renderer.make(Target(kind, resolved.renderer.name, resolved.arch, target.opts, target.interface))
    return self._renderers[key]

  def tensor_cores(self, arch: str) -> list[TensorCore]: return self.registry.tensor_cores(arch)

  @cached_property
  def _unused(self) -> Any: return None


Device = _Device()
