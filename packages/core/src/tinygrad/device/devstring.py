"""Parsing and formatting of DEV strings and device instance names.

  DEV      := target (';' target)*
  target   := [IFACE[:indices] '+'] DEVICE [':' RENDERER [':' ARCH[,opt...]]]
  opt      := a feature ('avx2', '+avx2', '-avx512f') or KEY=VALUE (a renderer setting: 'IMAGE_PITCH_ALIGNMENT=64')

An all-digit RENDERER field is a device instance index instead (CUDA:1), and then nothing may follow it.
Device *instance* names (what Tensor.to takes) are the smaller DEVICE[:N]. Stdlib only: this is imported before anything else.
"""
from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from tinygrad.helpers import DEV

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ARCH_RE = re.compile(r"[A-Za-z0-9_.+-]+")  # arch and opts; opts may start with '+'/'-' to toggle a feature
OPT_RE = re.compile(r"[A-Za-z0-9_.+-]+(=[A-Za-z0-9_.+-]+)?")  # an opt may also be KEY=VALUE
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_ARCH_CHARS = _NAME_CHARS | frozenset(".+-")
_OPT_CHARS = _ARCH_CHARS | frozenset("=")

_DEV_GRAMMAR = "DEV := target (';' target)*  with  target := [IFACE[:indices]+]DEVICE[:RENDERER[:ARCH[,opt...]]]  " \
               "(e.g. CPU, CPU:LLVM, AMD::gfx950, PCI:0+AMD, CUDA:PTX;CPU)"
_INSTANCE_GRAMMAR = "instance name := DEVICE[:N]  (e.g. CPU, CUDA, CUDA:1)"

@dataclass(frozen=True)
class Target:
  device: str                    # upper case, never empty after parse
  renderer: str = ""             # upper case; "" = the device's default
  arch: str = ""                 # "" = detect/default
  opts: tuple[str, ...] = ()     # extra arch options, e.g. ("znver2", "avx2", "-avx512f")
  interface: str = ""            # upper case; "" = first that opens
  indices: tuple[int, ...] = ()  # interface indices
  index: int | None = None       # device instance index (CUDA:1)
  def __str__(self) -> str: return format_target(self)

class DevStringError(ValueError):
  """A malformed DEV string or instance name. str() shows the string with a caret under the offending part and what was expected."""
  def __init__(self, msg: str, s: str, pos: int, end: int | None = None, what: str = "DEV"):
    self.msg, self.s, self.pos, self.end, self.what = msg, s, pos, max(end if end is not None else pos + 1, pos + 1), what
    # control chars would break the caret alignment, so show them as spaces (the repr on the first line keeps them exact)
    shown = "".join(c if c.isprintable() else " " for c in s)
    grammar = _INSTANCE_GRAMMAR if what == "instance name" else _DEV_GRAMMAR
    super().__init__(f"invalid {what} {s!r}: {msg}\n  {shown}\n  {' ' * pos}{'^' * (self.end - pos)}\n  expected {grammar}")
  def __reduce__(self) -> tuple: return (DevStringError, (self.msg, self.s, self.pos, self.end, self.what))

# ***** parsing *****

def _strip(s: str, a: int, b: int) -> tuple[int, int]:
  while a < b and s[a].isspace(): a += 1
  while b > a and s[b-1].isspace(): b -= 1
  return a, b

def _split(s: str, a: int, b: int, sep: str) -> list[tuple[int, int]]:
  # spans of the pieces of s[a:b] between seps, not yet stripped
  out: list[tuple[int, int]] = []
  start = a
  for i in range(a, b):
    if s[i] == sep: out, start = out + [(start, i)], i + 1
  return out + [(start, b)]

def _bad_char_hint(c: str) -> str:
  if c.isspace(): return "; no whitespace inside a field"
  if c == "+": return "; the IFACE+ prefix goes first, once (e.g. PCI+AMD)"
  if c == ";": return "; ';' separates targets in DEV only"
  return ""

def _name(s: str, a: int, b: int, kind: str, what: str) -> str:
  """A name field (device, renderer, interface) in s[a:b], upper-cased. Caller handles the empty case."""
  a, b = _strip(s, a, b)
  if s[a].isdigit():
    hint = " (an all-digit field after the device is an instance index, e.g. CUDA:1)" if kind == "renderer" else ""
    raise DevStringError(f"{kind} name {s[a:b]!r} can't start with a digit{hint}", s, a, b, what)
  for i in range(a, b):
    if s[i] not in _NAME_CHARS:
      raise DevStringError(f"unexpected {s[i]!r} in {kind} name {s[a:b]!r}: names are letters, digits and '_'{_bad_char_hint(s[i])}",
                           s, i, what=what)
  return s[a:b].upper()

def _arch_piece(s: str, a: int, b: int, kind: str, what: str) -> str:
  allowed, shown = (_OPT_CHARS, "'_.+-' (and one '=' in KEY=VALUE)") if kind == "arch option" else (_ARCH_CHARS, "'_.+-'")
  for i in range(a, b):
    if s[i] not in allowed:
      hint = "; KEY=VALUE settings go after the arch, e.g. a630,IMAGE_PITCH_ALIGNMENT=64" if s[i] == "=" else _bad_char_hint(s[i])
      raise DevStringError(f"unexpected {s[i]!r} in {kind} {s[a:b]!r}: allowed are letters, digits and {shown}{hint}", s, i, what=what)
  if kind == "arch option" and "=" in s[a:b] and not OPT_RE.fullmatch(s[a:b]):
    raise DevStringError(f"bad arch option {s[a:b]!r}: a setting is KEY=VALUE, both non-empty (e.g. IMAGE_PITCH_ALIGNMENT=64)", s, a, b, what)
  return s[a:b]

def _interface(s: str, a: int, b: int, what: str) -> tuple[str, tuple[int, ...]]:
  """IFACE[:indices] in s[a:b], where s[b] is the '+' that ends it."""
  parts = _split(s, a, b, ":")
  ia, ib = _strip(s, *parts[0])
  if ia == ib: raise DevStringError("expected an interface name before '+' (e.g. PCI+AMD), or drop the '+'", s, ia, what=what)
  iface = _name(s, ia, ib, "interface", what)
  if len(parts) == 1: return iface, ()
  xa, xb = _strip(s, *parts[1])
  if xa == xb: raise DevStringError(f"expected interface indices after '{iface}:' (e.g. {iface}:0,1+...), or drop the ':'", s, xa, what=what)
  indices: list[int] = []
  for pa, pb in _split(s, xa, xb, ","):
    pa, pb = _strip(s, pa, pb)
    if pa == pb: raise DevStringError("empty interface index: indices are non-negative integers separated by ','", s, pa, what=what)
    if not s[pa:pb].isdigit() or not s[pa:pb].isascii():
      raise DevStringError(f"bad interface index {s[pa:pb]!r}: indices are non-negative integers separated by ',' (e.g. PCI:0,1+AMD)",
                           s, pa, pb, what=what)
    indices.append(int(s[pa:pb]))
  return iface, tuple(indices)

def _target(s: str, a: int, b: int, what: str = "DEV") -> tuple[Target, dict[str, tuple[int, int]]]:
  """Parse the target in s[a:b]; also returns the span of each field present, for callers that want to point at one."""
  a, b = _strip(s, a, b)
  if a == b: raise DevStringError("empty target: expected a device name", s, a, what=what)
  spans: dict[str, tuple[int, int]] = {}
  iface: str = ""
  indices: tuple[int, ...] = ()
  # an interface prefix ends at the first '+' unless that '+' is inside the arch field (which has two ':' before it)
  plus = s.find("+", a, b)
  if plus != -1 and s.count(":", a, plus) <= 1:
    iface, indices = _interface(s, a, plus, what)
    spans["interface"] = (a, plus + 1)
    a, b = _strip(s, plus + 1, b)
    if a == b: raise DevStringError("expected a device name after '+' (e.g. PCI+AMD)", s, a, what=what)
  fields = _split(s, a, b, ":")
  if len(fields) > 3:
    raise DevStringError("too many ':' fields: a target is at most DEVICE:RENDERER:ARCH (ARCH options go after ',', e.g. CPU:LLVM:x86_64,avx2)",
                         s, fields[3][0] - 1, b, what)
  da, db = _strip(s, *fields[0])
  if da == db: raise DevStringError("expected a device name", s, da, what=what)
  device = _name(s, da, db, "device", what)
  spans["device"] = (da, db)
  renderer, arch = "", ""
  opts: tuple[str, ...] = ()
  index: int | None = None
  if len(fields) > 1:
    ra, rb = _strip(s, *fields[1])
    spans["renderer"] = (ra, rb)
    if ra < rb and s[ra:rb].isdigit() and s[ra:rb].isascii():
      index = int(s[ra:rb])
      if len(fields) > 2:
        raise DevStringError(f"the instance index goes alone: '{device}:{index}' selects instance {index} of {device} with its default renderer "
                             f"and can't take more fields. Put the renderer/arch in DEV (e.g. {device}:PTX) and select the instance with "
                             f"Tensor.to(\"{device}:{index}\")", s, ra, b, what)
    elif ra < rb: renderer = _name(s, ra, rb, "renderer", what)
  if len(fields) > 2:
    aa, ab = _strip(s, *fields[2])
    spans["arch"] = (aa, ab)
    pieces = [_strip(s, pa, pb) for pa, pb in _split(s, aa, ab, ",")]
    arch = _arch_piece(s, *pieces[0], "arch", what)
    for pa, pb in pieces[1:]:
      if pa == pb: raise DevStringError("empty arch option: options are ','-separated, e.g. x86_64,avx2,-avx512f", s, pa, what=what)
    opts = tuple(_arch_piece(s, pa, pb, "arch option", what) for pa, pb in pieces[1:])
  return Target(device, renderer, arch, opts, iface, indices, index), spans

@functools.lru_cache(maxsize=512)  # pure functions of the string, called for every tensor created
def parse_target(s: str) -> Target:
  """Parse one target, e.g. 'CPU:LLVM:x86_64,avx2' or 'PCI:0+AMD'. Names are upper-cased; arch and opts keep their case."""
  return _target(s, 0, len(s))[0]

@functools.lru_cache(maxsize=512)  # pure functions of the string, called for every tensor created
def parse_dev(s: str) -> tuple[Target, ...]:
  """Parse a whole DEV string: targets separated by ';'."""
  if not s.strip(): raise DevStringError("DEV is empty: expected at least one target", s, len(s) - len(s.lstrip()))
  return tuple(_target(s, a, b)[0] for a, b in _split(s, 0, len(s), ";"))

# ***** formatting *****

def _check(t: Target) -> None:
  # only targets that parse back to themselves can be formatted
  def bad(msg: str) -> None: raise ValueError(f"can't format {t!r}: {msg}")
  if not NAME_RE.fullmatch(t.device): bad(f"device {t.device!r} is not a name")
  for kind, v in (("renderer", t.renderer), ("interface", t.interface)):
    if v and not NAME_RE.fullmatch(v): bad(f"{kind} {v!r} is not a name")
  if t.arch and not ARCH_RE.fullmatch(t.arch): bad(f"arch {t.arch!r} has characters outside [A-Za-z0-9_.+-]")
  for o in t.opts:
    if not OPT_RE.fullmatch(o): bad(f"arch option {o!r} is empty or not [A-Za-z0-9_.+-]+ or KEY=VALUE")
  if t.indices and not t.interface: bad("interface indices need an interface")
  if any(i < 0 for i in t.indices): bad("interface indices must be non-negative")
  if t.index is not None:
    if t.index < 0: bad("the instance index must be non-negative")
    if t.renderer or t.arch or t.opts: bad("an instance index can't be combined with a renderer, arch or options")

def format_target(t: Target) -> str:
  """Canonical string of a target, the inverse of parse_target: upper-case names, no trailing ':'."""
  _check(t)
  out = ""
  if t.interface: out += t.interface.upper() + (":" + ",".join(map(str, t.indices)) if t.indices else "") + "+"
  out += t.device.upper()
  if t.index is not None: return out + f":{t.index}"
  if t.arch or t.opts: return out + f":{t.renderer.upper()}:" + ",".join((t.arch,) + tuple(t.opts))
  return out + (f":{t.renderer.upper()}" if t.renderer else "")

def format_dev(ts: tuple[Target, ...]) -> str:
  if not ts: raise ValueError("can't format an empty DEV: need at least one target")
  return ";".join(format_target(t) for t in ts)

# ***** instance names *****

@functools.lru_cache(maxsize=512)  # pure functions of the string, called for every tensor created
def parse_instance(name: str) -> tuple[str, int]:
  """A device instance name (what Tensor.to takes): 'CPU' -> ('CPU', 0), 'cuda:1' -> ('CUDA', 1)."""
  t, spans = _target(name, 0, len(name), "instance name")
  if t.interface:
    a, b = spans["interface"]
    raise DevStringError(f"an interface prefix belongs in DEV (e.g. DEV={format_target(t)}), not in a device instance name; "
                         f"use {instance_name(t.device, t.index or 0)!r}", name, a, b, "instance name")
  if t.renderer or t.arch or t.opts:
    # point from the first field that is set (the renderer, else the arch) to the end
    a, b = spans["renderer" if t.renderer else "arch"][0], _strip(name, 0, len(name))[1]
    settings = ", ".join(f"{k} {v}" for k, v in (("renderer", t.renderer), ("arch", t.arch), ("options", ",".join(t.opts))) if v)
    raise DevStringError(f"{format_target(t)!r} is a DEV target (device {t.device} with {settings}), not a device instance name. "
                         f"Instance names are DEVICE or DEVICE:N (e.g. {t.device!r}, '{t.device}:1'); choose the renderer with "
                         f"DEV={format_target(t)}", name, a, b, "instance name")
  return t.device, t.index or 0

def instance_name(device: str, index: int) -> str:
  """Inverse of parse_instance: ('CUDA', 0) -> 'CUDA', ('CUDA', 1) -> 'CUDA:1'."""
  if not NAME_RE.fullmatch(device): raise ValueError(f"device {device!r} is not a name")
  if index < 0: raise ValueError(f"instance index must be non-negative, got {index}")
  return device.upper() + (f":{index}" if index else "")

# ***** error helpers *****

def closest(name: str, choices: Iterable[str]) -> str | None:
  """The choice closest to name (case-insensitive, via difflib), or None if nothing is close."""
  by_upper: dict[str, str] = {}
  for c in choices: by_upper.setdefault(c.upper(), c)
  if name.upper() in by_upper: return by_upper[name.upper()]
  m = difflib.get_close_matches(name.upper(), list(by_upper), n=1, cutoff=0.6)
  return by_upper[m[0]] if m else None

def unknown_name_error(kind: str, name: str, choices: Iterable[str], hint: str = "") -> str:
  """e.g. "unknown device 'CUDE'; did you mean 'CUDA'? installed: CPU, CUDA, PYTHON" (+ ' ' + hint)."""
  cs = sorted(set(choices))
  best = closest(name, cs)
  msg = f"unknown {kind} {name!r}" + (f"; did you mean {best!r}?" if best is not None else ";") + f" installed: {', '.join(cs) if cs else 'none'}"
  return msg + (f" {hint}" if hint else "")


DEV.parse = parse_dev  # helpers.DEV reads parsed targets through this (helpers sits below the devices)
