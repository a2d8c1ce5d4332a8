import importlib.util
import pathlib
import pickle
import sys

import pytest

try:
  from tinygrad.device import devstring
except (ImportError, SyntaxError, NameError, AttributeError, TypeError):  # pragma: no cover
  # tinygrad may be half-written by someone else; devstring is stdlib-only, so load the file directly
  _path = pathlib.Path(__file__).parents[1] / "src" / "tinygrad" / "device" / "devstring.py"
  _spec = importlib.util.spec_from_file_location("tinygrad_devstring_standalone", _path)
  assert _spec is not None and _spec.loader is not None
  devstring = importlib.util.module_from_spec(_spec)
  sys.modules[_spec.name] = devstring
  _spec.loader.exec_module(devstring)

Target, DevStringError = devstring.Target, devstring.DevStringError
parse_target, parse_dev, format_target, format_dev = devstring.parse_target, devstring.parse_dev, devstring.format_target, devstring.format_dev
parse_instance, instance_name, closest, unknown_name_error = devstring.parse_instance, devstring.instance_name, devstring.closest, \
                                                            devstring.unknown_name_error

# (string, device, renderer, arch, opts, interface, indices, index)
EXAMPLES = [
  ("CPU", "CPU", "", "", (), "", (), None),
  ("CPU:LLVM", "CPU", "LLVM", "", (), "", (), None),
  ("CPU:CLANG", "CPU", "CLANG", "", (), "", (), None),
  ("CUDA", "CUDA", "", "", (), "", (), None),
  ("CUDA:PTX", "CUDA", "PTX", "", (), "", (), None),
  ("NV:CUDA:sm_90", "NV", "CUDA", "sm_90", (), "", (), None),
  ("AMD", "AMD", "", "", (), "", (), None),
  ("AMD:LLVM", "AMD", "LLVM", "", (), "", (), None),
  ("AMD::gfx950", "AMD", "", "gfx950", (), "", (), None),
  ("PCI+AMD", "AMD", "", "", (), "PCI", (), None),
  ("USB+AMD:LLVM", "AMD", "LLVM", "", (), "USB", (), None),
  ("MOCKKFD+AMD", "AMD", "", "", (), "MOCKKFD", (), None),
  ("QCOM", "QCOM", "", "", (), "", (), None),
  ("NULL:HIP:gfx950", "NULL", "HIP", "gfx950", (), "", (), None),
  ("NULL:QCOMCL:a630", "NULL", "QCOMCL", "a630", (), "", (), None),
  ("NULL:QCOMCL:a630,IMAGE_PITCH_ALIGNMENT=64", "NULL", "QCOMCL", "a630", ("IMAGE_PITCH_ALIGNMENT=64",), "", (), None),
  ("NULL:CUDA:sm_90", "NULL", "CUDA", "sm_90", (), "", (), None),
  ("PYTHON::gfx1100", "PYTHON", "", "gfx1100", (), "", (), None),
  ("PYTHON::sm_80", "PYTHON", "", "sm_80", (), "", (), None),
  ("CPU:LLVM:x86_64,znver2,avx2,-avx512f", "CPU", "LLVM", "x86_64", ("znver2", "avx2", "-avx512f"), "", (), None),
  ("CPU:LLVM:,avx2", "CPU", "LLVM", "", ("avx2",), "", (), None),
  ("CPU::,+avx2", "CPU", "", "", ("+avx2",), "", (), None),
  ("AMD:LLVM:gfx950,+xnack", "AMD", "LLVM", "gfx950", ("+xnack",), "", (), None),
  ("PCI:0,1+AMD", "AMD", "", "", (), "PCI", (0, 1), None),
  ("PCI:3+AMD:LLVM:gfx950", "AMD", "LLVM", "gfx950", (), "PCI", (3,), None),
  ("CUDA:1", "CUDA", "", "", (), "", (), 1),
  ("CUDA:0", "CUDA", "", "", (), "", (), 0),
  ("PCI+AMD:2", "AMD", "", "", (), "PCI", (), 2),
]

@pytest.mark.parametrize("s", [e[0] for e in EXAMPLES])
def test_round_trip(s):
  t = parse_target(s)
  assert format_target(t) == s and str(t) == s
  assert parse_target(format_target(t)) == t
  assert parse_dev(s) == (t,) and format_dev((t,)) == s

@pytest.mark.parametrize("s,device,renderer,arch,opts,interface,indices,index", EXAMPLES)
def test_fields(s, device, renderer, arch, opts, interface, indices, index):
  assert parse_target(s) == Target(device, renderer, arch, opts, interface, indices, index)

@pytest.mark.parametrize("s,expected,canonical", [
  ("cpu:llvm", Target("CPU", "LLVM"), "CPU:LLVM"),
  ("amd::GFX950", Target("AMD", arch="GFX950"), "AMD::GFX950"),
  ("Nv:cuda:SM_90", Target("NV", "CUDA", "SM_90"), "NV:CUDA:SM_90"),
  ("pci:0+amd:llvm:gfx950,+XNACK", Target("AMD", "LLVM", "gfx950", ("+XNACK",), "PCI", (0,)), "PCI:0+AMD:LLVM:gfx950,+XNACK"),
  ("cuda:1", Target("CUDA", index=1), "CUDA:1"),
])
def test_case_insensitive(s, expected, canonical):
  assert parse_target(s) == expected and format_target(parse_target(s)) == canonical

@pytest.mark.parametrize("s,canonical", [
  ("  CPU : LLVM  ", "CPU:LLVM"),
  (" pci : 0 , 1 + amd ", "PCI:0,1+AMD"),
  ("CPU:LLVM:", "CPU:LLVM"),           # empty trailing fields mean default and vanish
  ("AMD::", "AMD"),
  ("CPU:LLVM: x86_64 , avx2 ", "CPU:LLVM:x86_64,avx2"),
  ("CUDA:01", "CUDA:1"),
  ("PCI:007+AMD", "PCI:7+AMD"),
])
def test_normalization(s, canonical):
  assert format_target(parse_target(s)) == canonical

def test_format_minimal():
  assert format_target(Target("AMD", arch="gfx950")) == "AMD::gfx950"
  assert format_target(Target("CPU", "LLVM", "x86_64", ("znver2", "avx2", "-avx512f"))) == "CPU:LLVM:x86_64,znver2,avx2,-avx512f"
  assert format_target(Target("AMD", interface="PCI", indices=(0, 1))) == "PCI:0,1+AMD"
  assert format_target(Target("CUDA", index=1)) == "CUDA:1"
  assert format_target(Target("CPU", "LLVM", opts=("avx2",))) == "CPU:LLVM:,avx2"
  assert format_target(Target("cpu", "llvm")) == "CPU:LLVM"  # names come out upper case even if built by hand

@pytest.mark.parametrize("t", [
  Target(""), Target("1CPU"), Target("CPU", "LL VM"), Target("CPU", arch="x:y"), Target("CPU", opts=("",)),
  Target("AMD", indices=(0,)), Target("AMD", interface="PCI", indices=(-1,)), Target("CUDA", "PTX", index=1), Target("CUDA", index=-1),
])
def test_format_unrepresentable(t):
  with pytest.raises(ValueError): format_target(t)

def test_multi_target():
  ts = parse_dev("CPU;CUDA:PTX")
  assert ts == (Target("CPU"), Target("CUDA", "PTX"))
  assert format_dev(ts) == "CPU;CUDA:PTX"
  ts = parse_dev(" cpu:llvm:x86_64,avx2 ; PCI:0+amd::gfx950 ; cuda:1 ")
  assert ts == (Target("CPU", "LLVM", "x86_64", ("avx2",)), Target("AMD", arch="gfx950", interface="PCI", indices=(0,)), Target("CUDA", index=1))
  assert format_dev(ts) == "CPU:LLVM:x86_64,avx2;PCI:0+AMD::gfx950;CUDA:1"
  assert parse_dev(format_dev(ts)) == ts
  with pytest.raises(ValueError): format_dev(())

def test_target_hashable_and_frozen():
  t = parse_target("CPU:LLVM")
  assert {t: 1}[Target("CPU", "LLVM")] == 1
  with pytest.raises(AttributeError): t.device = "CUDA"  # type: ignore[misc]

# (function, string, text the message must mention, caret position, words the message must contain)
ERRORS = [
  (parse_dev, "", "", 0, "DEV is empty"),
  (parse_dev, "   ", "", 3, "DEV is empty"),
  (parse_dev, "CPU;;CUDA", "CPU;;CUDA", 4, "empty target"),
  (parse_dev, "CPU;", "CPU;", 4, "empty target"),
  (parse_dev, "CPU:LL VM", "LL VM", 6, "letters, digits"),
  (parse_dev, "CP$U", "CP$U", 2, "letters, digits"),
  (parse_dev, "CPU:LLVM:x86!", "x86!", 12, "allowed are"),
  (parse_dev, "CPU:LLVM:x86:extra", ":extra", 12, "too many ':'"),
  (parse_dev, "+AMD", "+AMD", 0, "interface name"),
  (parse_dev, "PCI+", "PCI+", 4, "device name after '+'"),
  (parse_dev, "PCI:a+AMD", "'a'", 4, "non-negative integers"),
  (parse_dev, "PCI:0,-1+AMD", "'-1'", 6, "non-negative integers"),
  (parse_dev, "PCI:+AMD", "PCI:", 4, "interface indices"),
  (parse_dev, "PCI:0,+AMD", "PCI:0,+AMD", 6, "empty interface index"),
  (parse_dev, "PCI+USB+AMD", "USB+AMD", 7, "goes first, once"),
  (parse_dev, "1", "'1'", 0, "can't start with a digit"),
  (parse_dev, "1:PTX", "'1'", 0, "can't start with a digit"),
  (parse_dev, "CUDA:1PTX", "1PTX", 5, "can't start with a digit"),
  (parse_dev, ":LLVM", ":LLVM", 0, "expected a device name"),
  (parse_dev, "CUDA:1:PTX", "Tensor.to(\"CUDA:1\")", 5, "instance index goes alone"),
  (parse_dev, "CPU:LLVM:x86_64,", "x86_64,", 16, "empty arch option"),
  (parse_dev, "NULL:QCOMCL:a630=1", "a630=1", 16, "settings go after the arch"),
  (parse_dev, "NULL:QCOMCL:a630,K=", "K=", 17, "KEY=VALUE, both non-empty"),
  (parse_dev, "NULL:QCOMCL:a630,=5", "=5", 17, "KEY=VALUE, both non-empty"),
  (parse_dev, "CPU;CUDA:P-TX", "P-TX", 10, "renderer name"),
  (parse_target, "CPU;CUDA", "CPU;CUDA", 3, "separates targets"),
  (parse_instance, "CPU:LLVM", "not a device instance name", 4, "DEV=CPU:LLVM"),
  (parse_instance, "AMD::gfx950", "not a device instance name", 5, "arch gfx950"),
  (parse_instance, "PCI+AMD", "interface prefix", 0, "'AMD'"),
  (parse_instance, "CUDA:1:PTX", "CUDA:1:PTX", 5, "instance index goes alone"),
  (parse_instance, "", "", 0, "empty"),
]

@pytest.mark.parametrize("fn,s,mention,pos,words", ERRORS)
def test_errors(fn, s, mention, pos, words):
  with pytest.raises(DevStringError) as ei:
    fn(s)
  e, msg = ei.value, str(ei.value)
  assert isinstance(e, ValueError)
  assert mention in msg and words in msg and "^" in msg and "expected" in msg
  assert e.pos == pos
  # the caret sits under the offending part of the string as echoed in the message
  lines = msg.split("\n")
  echo = next(i for i, ln in enumerate(lines) if ln == "  " + s)
  assert lines[echo + 1].index("^") - 2 == pos
  assert pickle.loads(pickle.dumps(e)).args == e.args

@pytest.mark.parametrize("name,expected", [
  ("CPU", ("CPU", 0)), ("cuda:1", ("CUDA", 1)), ("CUDA:0", ("CUDA", 0)), (" amd : 12 ", ("AMD", 12)), ("null", ("NULL", 0)),
])
def test_parse_instance(name, expected):
  assert parse_instance(name) == expected
  assert parse_instance(instance_name(*expected)) == expected

@pytest.mark.parametrize("device,index,expected", [("CUDA", 0, "CUDA"), ("CUDA", 1, "CUDA:1"), ("amd", 3, "AMD:3")])
def test_instance_name(device, index, expected):
  assert instance_name(device, index) == expected

@pytest.mark.parametrize("device,index", [("CUDA", -1), ("", 0), ("CPU:LLVM", 0)])
def test_instance_name_bad(device, index):
  with pytest.raises(ValueError): instance_name(device, index)

@pytest.mark.parametrize("name,choices,expected", [
  ("CUDE", ["CPU", "CUDA", "PYTHON"], "CUDA"),
  ("cuda", ["CPU", "CUDA"], "CUDA"),
  ("llmv", ["LLVM", "CLANG"], "LLVM"),
  ("pyhton", {"PYTHON", "CPU"}, "PYTHON"),
  ("Qcom", ["qcom", "QCOM"], "qcom"),  # first spelling of a case-insensitive duplicate wins
  ("XYZZY", ["CPU", "CUDA"], None),
  ("CPU", [], None),
])
def test_closest(name, choices, expected):
  assert closest(name, choices) == expected

def test_unknown_name_error():
  assert unknown_name_error("device", "CUDE", ["CPU", "CUDA", "PYTHON"]) == "unknown device 'CUDE'; did you mean 'CUDA'? installed: CPU, CUDA, PYTHON"
  assert unknown_name_error("device", "CUDE", iter(["PYTHON", "CUDA", "CPU"]), "set DEV=CPU to force the CPU.") == \
    "unknown device 'CUDE'; did you mean 'CUDA'? installed: CPU, CUDA, PYTHON set DEV=CPU to force the CPU."
  assert unknown_name_error("renderer", "XYZZY", ["LLVM", "CLANG"]) == "unknown renderer 'XYZZY'; installed: CLANG, LLVM"
  assert unknown_name_error("device", "FOO", []) == "unknown device 'FOO'; installed: none"
