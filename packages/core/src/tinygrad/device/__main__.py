"""`python -m tinygrad.device`: every installed device, renderer and arch, and whether each works here."""
from __future__ import annotations

import sys

from tinygrad.device.registry import Device, registry
from tinygrad.helpers import DEV


def _status(why: str | None) -> str: return "ok" if why is None else f"unavailable: {why}"


def _safe(fn) -> str | None:
  try: return fn()
  except Exception as e:  # noqa: BLE001  a broken check is itself the answer to "does it work here"
    return f"{type(e).__name__}: {e}"


def _opened(name: str) -> str:
  """The runtime class a device instance opens as, with its interface's name where it has one (NVK, MOCK, KFD ...)."""
  try: dev = Device[name]
  except Exception as e:  # noqa: BLE001  not opening is the answer
    return f"does not open ({type(e).__name__}: {e})"
  iface = getattr(getattr(dev, "iface", None), "name", None)
  return type(dev).__name__ + (f" through interface {iface}" if iface else "")


def report() -> str:
  reg = registry.load()
  lines = [f"plugins: {', '.join(reg.plugin_names)}"]
  for name, err in reg.plugin_errors.items(): lines.append(f"  plugin {name!r} failed to load: {err}")
  lines.append(f"DEV={DEV.value or '(unset)'}  default device: {Device.DEFAULT}")
  if DEV.value: lines.append(f"  DEV opens {Device.DEFAULT}: {_opened(Device.DEFAULT)}")  # which runtime (and interface) DEV gets here
  for name, spec in sorted(reg.devices.items()):
    why = _safe(spec.available)
    kind = "" if spec.runs_kernels else " (compile only)" if name == "NULL" else " (storage)"
    ifaces = ", ".join((i or "default") + (" (a mock: only when DEV names it)" if i in spec.mock_interfaces else "") for i in spec.interfaces)
    lines.append(f"{name}{kind}: {_status(why)}  [from {spec.package or '?'}; interfaces: {ifaces}]")
    for r in reg.renderers_for(name):
      if name == "NULL": continue
      archs = "any" if callable(r.archs) or tuple(r.archs) == ("*",) else ", ".join(r.archs)
      default_arch = _safe(r.default_arch) or "-"
      lines.append(f"  renderer {r.name}{' (default)' if r.default else ''}: {_status(_safe(r.available))}  "
                   f"archs: {archs}; default arch: {default_arch}")
    if name == "NULL":
      lines.append(f"  renderers: every installed one ({', '.join(sorted({r.device + ':' + r.name for r in reg.renderers_for('NULL')}))})")
  for pattern, tcs in reg.tensor_core_specs:
    lines.append(f"tensor cores for {pattern}: " + ", ".join(f"{tc.name or tc.dims} {tc.dtype_in!r}->{tc.dtype_out!r}" for tc in tcs))
  return "\n".join(lines)


if __name__ == "__main__":
  print(report())
  sys.exit(0)
