"""The device registry: DEV switching with Context, instance names, errors for unknown/missing devices and renderers,
the NULL device, `python -m tinygrad.device` and plugin loading. Every test sets DEV itself, so the session's DEV
doesn't matter."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from tinygrad import Device, Tensor, dtypes
from tinygrad.device.registry import DeviceNotFound
from tinygrad.helpers import Context

registry = Device.registry
HAS_CPU = "CPU" in registry.devices
needs_cpu = pytest.mark.skipif(not HAS_CPU, reason="the cpu plugin (tinygrad-backend-cpu) is not installed")
# installed as a distribution (entry point 'cpu'), as opposed to loaded by module name from TINYGRAD_PLUGIN_MODULES in a
# source checkout (the GPU machine): only then do subprocesses with a clean environment and TINYGRAD_PLUGINS=cpu see it
CPU_AS_DIST = "cpu" in registry.plugin_names
needs_cpu_dist = pytest.mark.skipif(not CPU_AS_DIST, reason="the cpu plugin is not installed as a distribution (entry point 'cpu')")


def renderer_available(name: str) -> bool:
  specs = [r for r in registry.renderers_for("CPU") if r.name == name]
  return bool(specs) and specs[0].available() is None


needs_llvm = pytest.mark.skipif(not (HAS_CPU and renderer_available("LLVM")), reason="the CPU LLVM renderer is not available here")
needs_clang = pytest.mark.skipif(not (HAS_CPU and renderer_available("CLANG")), reason="the CPU CLANG renderer is not available here")


def clean_env() -> dict[str, str]:
  """The environment without the settings that choose devices and plugins."""
  return {k: v for k, v in os.environ.items() if k not in ("DEV", "TINYGRAD_PLUGINS", "TINYGRAD_PLUGIN_MODULES")}


def run_py(code: str, **env: str) -> subprocess.CompletedProcess:
  full = clean_env() | env
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120)


# ---- DEV switches the default device and the renderer

@needs_cpu
@pytest.mark.compile_only
@pytest.mark.parametrize("dev,renderer", [("CPU", "LLVM"), ("CPU:LLVM", "LLVM"), ("CPU:CLANG", "CLANG"), ("cpu:clang", "CLANG"),
                                          ("CPU:CLANG;PYTHON", "CLANG")])
def test_context_dev_picks_renderer(dev: str, renderer: str):
  with Context(DEV=dev):
    assert Device.DEFAULT == "CPU"
    assert Device.renderer("CPU").name == renderer
    assert Device.renderer("CPU:1").name == renderer  # every instance of a device compiles the same way
    assert Device.renderer("CPU").device == "CPU"


@pytest.mark.compile_only
def test_context_dev_python_and_restore():
  with Context(DEV="PYTHON"):
    assert Device.DEFAULT == "PYTHON"
    assert Device.renderer("PYTHON").name == "PYTHON"
    assert Tensor([1, 2]).device == "PYTHON"
    with Context(DEV="NULL"):
      assert Device.DEFAULT == "NULL" and Tensor([1, 2]).device == "NULL"
    assert Device.DEFAULT == "PYTHON"


@pytest.mark.compile_only
def test_dev_unset_picks_best_available():
  """With DEV unset the usable device of lowest DeviceSpec.default_rank wins (a GPU where one works, else CPU, else PYTHON)."""
  order = [name for _, name in sorted((s.default_rank, name) for name, s in registry.devices.items() if s.default_rank is not None)]
  assert order[-1] == "PYTHON" and (order[-2] == "CPU" if HAS_CPU else True)
  usable = [d for d in order if registry.devices[d].available() is None]
  with Context(DEV=""):
    assert Device.DEFAULT == usable[0]
    if not any(d in usable for d in order[:order.index("CPU") if "CPU" in order else -1]):  # no GPU here: the CPU plugin decides
      assert Device.DEFAULT == ("CPU" if HAS_CPU and registry.devices["CPU"].available() is None else "PYTHON")


@needs_cpu
@pytest.mark.compile_only
def test_dev_with_instance_index():
  with Context(DEV="CPU:1"):
    assert Device.DEFAULT == "CPU:1"
    assert Tensor([1, 2]).device == "CPU:1"
    assert Device.renderer("CPU").name == "LLVM"


@needs_cpu
@pytest.mark.parametrize("dev", [pytest.param("CPU:LLVM", marks=needs_llvm), pytest.param("CPU:CLANG", marks=needs_clang)])
def test_switching_renderer_runs_correctly(dev: str):
  with Context(DEV=dev):
    t = Tensor([1.5, -2.0, 3.25]) * 2 + 1
    assert t.device == "CPU"
    np.testing.assert_array_equal(t.numpy(), np.array([4.0, -3.0, 7.5], dtype=np.float32))
    assert (Tensor.arange(6).reshape(2, 3).sum(1)).tolist() == [3, 12]


# ---- instance names

@pytest.mark.compile_only
@pytest.mark.parametrize("name,canon", [("cpu", "CPU"), ("CPU", "CPU"), ("cpu:1", "CPU:1"), ("CPU:0", "CPU"), ("python", "PYTHON"),
                                        (" cuda:2 ", "CUDA:2"), ("null", "NULL")])
def test_canonicalize(name: str, canon: str):
  assert Device.canonicalize(name) == canon


@pytest.mark.compile_only
def test_canonicalize_none_is_default():
  with Context(DEV="PYTHON"):
    assert Device.canonicalize(None) == "PYTHON"


@pytest.mark.compile_only
@pytest.mark.parametrize("bad", ["CPU:LLVM", "PCI+AMD", "CPU:1:x", "1CPU", ""])
def test_canonicalize_rejects_non_instance_names(bad: str):
  with pytest.raises(ValueError):
    Device.canonicalize(bad)


@needs_cpu
@pytest.mark.compile_only
def test_instances_are_distinct_objects():
  with Context(DEV="CPU"):
    cpu0, cpu1 = Device["CPU"], Device["CPU:1"]
    assert cpu0 is not cpu1
    assert Device["cpu:1"] is cpu1 and Device["CPU:0"] is cpu0
    assert cpu0.device == "CPU" and cpu1.device == "CPU:1"
    assert cpu0.allocator is not cpu1.allocator


@pytest.mark.compile_only
def test_python_instances_are_distinct_objects():
  with Context(DEV="PYTHON"):
    assert Device["PYTHON"] is not Device["PYTHON:1"] and Device["PYTHON:1"] is Device["python:1"]


@needs_cpu
@needs_llvm
def test_tensor_to_other_instance():
  with Context(DEV="CPU:LLVM"):
    a = Tensor([1, 2])
    b = a.to("CPU:1")
    assert b.device == "CPU:1" and a.device == "CPU"
    assert b.to("cpu:1") is b  # already there
    np.testing.assert_array_equal(b.numpy(), np.array([1, 2], dtype=np.int32))
    c = b * 10 + 1
    assert c.device == "CPU:1"
    assert c.tolist() == [11, 21]
    back = c.to("CPU")
    assert back.device == "CPU" and back.tolist() == [11, 21]
    # and across device kinds
    p = c.to("PYTHON")
    assert p.device == "PYTHON" and (p + 1).tolist() == [12, 22]
    assert Tensor([0.5, 1.5], device="PYTHON").to("CPU:1").tolist() == [0.5, 1.5]


# ---- errors

@pytest.mark.compile_only
@pytest.mark.parametrize("dev,nearest", [pytest.param("CPUU", "CPU", marks=needs_cpu), ("PYTHN", "PYTHON"), ("NUL", "NULL")])
def test_unknown_device_suggests_nearest(dev: str, nearest: str):
  with Context(DEV=dev):
    assert Device.DEFAULT == dev  # parsing alone doesn't check what is installed
    with pytest.raises(DeviceNotFound) as e:
      Device[Device.DEFAULT]
    msg = str(e.value)
    assert f"unknown device {dev!r}" in msg and f"did you mean {nearest!r}" in msg
    for installed in sorted(registry.devices): assert installed in msg
    assert isinstance(e.value, KeyError)
    with pytest.raises(DeviceNotFound, match=f"did you mean {nearest!r}"):
      Device.renderer(Device.DEFAULT)
    with pytest.raises(DeviceNotFound, match=f"did you mean {nearest!r}"):
      (Tensor([1.0, 2.0]) + 1).realize()


@pytest.mark.compile_only
def test_unknown_device_with_nothing_close():
  with Context(DEV="ZZZQQQ"), pytest.raises(DeviceNotFound) as e:
    Device["ZZZQQQ"]
  assert "did you mean" not in str(e.value) and "PYTHON" in str(e.value)


@pytest.mark.compile_only
@pytest.mark.parametrize("dev,package", [("AMD", "tinygrad-backend-amd"), ("CUDA", "tinygrad-backend-nv"), ("NV", "tinygrad-backend-nv")])
def test_known_but_missing_backend_says_what_to_install(dev: str, package: str):
  if dev in registry.devices: pytest.skip(f"{dev} is installed here")
  with Context(DEV=dev):
    with pytest.raises(DeviceNotFound, match=f"install {package}"):
      Device[dev]
    with pytest.raises(DeviceNotFound, match=f"install {package}"):
      Device.renderer(dev)


@needs_cpu
@pytest.mark.compile_only
@pytest.mark.parametrize("dev", ["CPU:FOO", "CPU:LLVMM", "CPU:PYTHON"])
def test_unknown_renderer_lists_installed(dev: str):
  with Context(DEV=dev), pytest.raises(DeviceNotFound) as e:
    Device.renderer("CPU")
  msg = str(e.value)
  assert "renderer" in msg and "CLANG" in msg and "LLVM" in msg and dev.split(":")[1] in msg
  if dev == "CPU:LLVMM": assert "did you mean 'LLVM'" in msg


@needs_cpu
@pytest.mark.compile_only
def test_renderer_hint_suggests_working_dev():
  # PYTHON is a renderer of another device: the error says which DEV to use instead, and what it says must work
  with Context(DEV="CPU:PYTHON"), pytest.raises(DeviceNotFound) as e:
    Device.renderer("CPU")
  suggested = re.findall(r"(?:DEV=|or )([A-Z]+:[A-Z]+)", str(e.value))
  assert suggested, str(e.value)
  for dev in suggested:
    with Context(DEV=dev):
      assert Device.renderer(Device.DEFAULT).name == "PYTHON", f"the error suggests DEV={dev}, which doesn't work"


# ---- NULL

@needs_cpu
@pytest.mark.compile_only
@pytest.mark.parametrize("dev,renderer", [("NULL:LLVM", "LLVM"), ("NULL:CLANG", "CLANG"), ("null:llvm", "LLVM")])
def test_null_compiles_with_any_renderer(dev: str, renderer: str):
  with Context(DEV=dev):
    assert Device.DEFAULT == "NULL"
    r = Device.renderer("NULL")
    assert r.name == renderer and r.device == "CPU"  # NULL borrows the CPU's renderer
    assert not Device["NULL"].runs_kernels


@pytest.mark.compile_only
def test_null_without_renderer_picks_a_default_one():
  with Context(DEV="NULL"):
    specs = registry.renderers_for("NULL")
    if not specs: pytest.skip("no renderer installed that NULL could borrow")
    r = Device.renderer("NULL")
    assert r.name != "PYTHON"
    assert any(s.name == r.name and s.device == r.device and s.default for s in specs)


@needs_cpu
@pytest.mark.compile_only
def test_null_realizes_but_has_no_data():
  with Context(DEV="NULL:LLVM"):
    t = ((Tensor([1.0, 2.0, 3.0]) * 2).sum() + Tensor.arange(3).cast(dtypes.float32).max()).realize()
    assert t.device == "NULL" and t.shape == ()
    for read in (lambda: t.numpy(), lambda: t.tolist(), lambda: t.item(), lambda: t.data()):
      with pytest.raises(RuntimeError, match="NULL device compiles kernels but does not run them"):
        read()


# ---- python -m tinygrad.device and plugins

@pytest.mark.compile_only
def test_device_report_cli():
  res = subprocess.run([sys.executable, "-m", "tinygrad.device"], capture_output=True, text=True, timeout=120,
                       env=clean_env())
  assert res.returncode == 0, res.stderr
  out = res.stdout
  for word in ["PYTHON", "NULL"] + (["CPU", "LLVM", "CLANG"] if CPU_AS_DIST else []):
    assert re.search(rf"\b{word}\b", out), f"{word} missing from:\n{out}"
  assert "plugins: core" in out
  if CPU_AS_DIST: assert re.search(r"^plugins: .*\bcpu\b", out, re.M)


@pytest.mark.compile_only
def test_plugin_registry():
  assert registry.plugin_names[0] == "core"
  assert {"PYTHON", "NULL"} <= set(registry.devices)
  # core and the cpu plugin load cleanly (another plugin failing to load is reported in plugin_errors, not raised)
  assert "core" not in registry.plugin_errors and "cpu" not in registry.plugin_errors, registry.plugin_errors
  assert [r.name for r in registry.renderers_for("PYTHON")] == ["PYTHON"]
  assert "PYTHON" not in {r.name for r in registry.renderers_for("NULL")}


@needs_cpu_dist
@pytest.mark.compile_only
def test_plugin_registry_lists_cpu():
  assert "cpu" in registry.plugin_names
  cpu = registry.devices["CPU"]
  assert cpu.package == "tinygrad-backend-cpu" and cpu.runs_kernels
  renderers = registry.renderers_for("CPU")
  assert {r.name for r in renderers} == {"LLVM", "CLANG"}
  assert [r.name for r in renderers if r.default] == ["LLVM"]
  assert {"LLVM", "CLANG"} <= {r.name for r in registry.renderers_for("NULL")}


@pytest.mark.compile_only
def test_tinygrad_plugins_empty_loads_core_only():
  code = ("from tinygrad import Device; r = Device.registry; print(r.plugin_names); "
          "print(sorted({v.package for v in r.devices.values()})); print(sorted(r.devices)); print(Device.DEFAULT); "
          "print(sorted({x.name for x in r.renderers}))")
  res = run_py(code, TINYGRAD_PLUGINS="")
  assert res.returncode == 0, res.stderr
  names, packages, devices, default, renderers = res.stdout.strip().splitlines()
  assert names == "['core']"
  assert packages == "['tinygrad']"  # only core's own devices (PYTHON, NULL, ...)
  assert "'PYTHON'" in devices and "'NULL'" in devices and "'CPU'" not in devices
  assert default == "PYTHON"
  assert renderers == "['PYTHON']"


@needs_cpu_dist
@pytest.mark.compile_only
def test_tinygrad_plugins_selects_by_name():
  res = run_py("from tinygrad import Device; print(Device.registry.plugin_names)", TINYGRAD_PLUGINS="cpu")
  assert res.returncode == 0, res.stderr
  assert res.stdout.strip() == "['core', 'cpu']"
  res = run_py("from tinygrad import Device; print(Device.registry.plugin_names)", TINYGRAD_PLUGINS=" nothing_named_this ")
  assert res.stdout.strip() == "['core']"


@pytest.mark.compile_only
def test_tinygrad_plugins_empty_cli_report():
  res = subprocess.run([sys.executable, "-m", "tinygrad.device"], capture_output=True, text=True, timeout=120,
                       env=clean_env() | {"TINYGRAD_PLUGINS": ""})
  assert res.returncode == 0, res.stderr
  assert res.stdout.startswith("plugins: core\n")
  assert not re.search(r"^CPU", res.stdout, re.M)


# ---- interfaces: IFACE+DEVICE

def test_named_interface_opens_without_the_device_and_stays_apart(monkeypatch):
  """DEV=MOCK+FAKEIF opens the named mock interface even where available() says the hardware is missing, and an instance
  opened that way is never what DEV=FAKEIF gets: a mock is chosen by name only."""
  from tinygrad.device.plugin import Allocator, Compiled, DeviceSpec, Target
  opened: list[str] = []

  def open_mock(index: int, target: Target) -> Compiled:
    if target.interface != "MOCK": raise RuntimeError("the mock opens only when DEV names it")
    opened.append(target.interface)
    return Compiled("FAKEIF", Allocator(), None)

  def open_hw(index: int, target: Target) -> Compiled: raise RuntimeError("no hardware")

  monkeypatch.setitem(registry.devices, "FAKEIF", DeviceSpec("FAKEIF", {"HW": open_hw, "MOCK": open_mock}, available=lambda: "no FAKEIF here",
                                                             mock_interfaces=("MOCK",)))
  monkeypatch.setattr(Device, "_opened", dict(Device._opened))
  with Context(DEV="MOCK+FAKEIF"):
    dev = Device["FAKEIF"]
    assert Device["FAKEIF"] is dev and opened == ["MOCK"]
  with Context(DEV="FAKEIF"), pytest.raises(RuntimeError, match="not available here: no FAKEIF here"): Device["FAKEIF"]
  with Context(DEV="HW+FAKEIF"), pytest.raises(RuntimeError, match="not available here: no FAKEIF here"): Device["FAKEIF"]
  with Context(DEV="TYPO+FAKEIF"), pytest.raises(DeviceNotFound, match="interface for FAKEIF"): Device["FAKEIF"]


def test_mock_interfaces_open_only_when_named(monkeypatch):
  """DeviceSpec.mock_interfaces: tried only when DEV names one, not gated by available() (which is about the hardware),
  the mock's instance and the hardware's are kept apart when DEV switches between them, and the renderer sees the interface."""
  from tinygrad.device.plugin import DeviceSpec, RendererSpec
  from tinygrad.runtime.python import PythonRenderer, open_python
  opened: list[str] = []
  def hw(index, target): raise RuntimeError("no such hardware")
  def fake(index, target):
    opened.append(target.interface)
    return open_python(index, target)
  made: list[str] = []
  def make(target):
    made.append(target.interface)
    return PythonRenderer(target)
  spec = DeviceSpec("MOCKTEST", {"HW": hw, "FAKE": fake}, available=lambda: "the hardware is missing", mock_interfaces=("FAKE",))
  monkeypatch.setitem(registry.devices, "MOCKTEST", spec)
  monkeypatch.setattr(registry, "renderers", [*registry.renderers, RendererSpec(device="MOCKTEST", name="PY", make=make, default=True)])
  monkeypatch.setattr(Device, "_opened", {})
  monkeypatch.setattr(Device, "_renderers", {})
  with Context(DEV="MOCKTEST"), pytest.raises(RuntimeError, match="not available here: the hardware is missing"): Device["MOCKTEST"]
  with Context(DEV="FAKE+MOCKTEST"):
    assert Device["MOCKTEST"] is Device["MOCKTEST"] and opened == ["FAKE"]
    Device.renderer("MOCKTEST")
    assert made == ["FAKE"]
  monkeypatch.setitem(registry.devices, "MOCKTEST", DeviceSpec("MOCKTEST", {"HW": hw, "FAKE": fake}, mock_interfaces=("FAKE",)))
  with Context(DEV="MOCKTEST"), pytest.raises(RuntimeError, match=r"could not open device MOCKTEST: HW: RuntimeError: no such hardware$"):
    Device["MOCKTEST"]  # opened apart for the hardware, and the mock is not tried
  with Context(DEV="FAKE+MOCKTEST"): Device["MOCKTEST"]
  assert opened == ["FAKE"]  # back on the mock: the instance it opened before
