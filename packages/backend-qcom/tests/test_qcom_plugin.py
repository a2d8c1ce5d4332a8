"""backend-qcom's registrations: devices, DEV strings with KEY=VALUE options, archs, and the errors for what is missing."""
from __future__ import annotations

import pytest
from tinygrad import Device, Tensor
from tinygrad.device.registry import DeviceNotFound, registry
from tinygrad.helpers import Context
from tinygrad_backend_qcom.opencl import cl_status
from tinygrad_backend_qcom.plugin import KGSL_PATH
from tinygrad_backend_qcom.qcomcl import QCOMCLRenderer, parse_options

HAS_CL = cl_status()[1] is None
needs_cl = pytest.mark.skipif(not HAS_CL, reason=f"no OpenCL device: {cl_status()[1]}")


def test_devices_registered() -> None:
  reg = registry.load()
  for kind in ("CL", "QCOM"):
    assert reg.devices[kind].package == "tinygrad-backend-qcom"
    assert [r.name for r in reg.renderers_for(kind)] == ["QCOMCL"]


@needs_cl
@pytest.mark.parametrize("dev,device,arch,opts", [
  ("CL", "CL", None, {}), ("CL:QCOMCL", "CL", None, {}), ("cl:qcomcl:cl_fp64", "CL", "cl_fp64", {}),
  ("NULL:QCOMCL:a630", "NULL", "a630", {}), ("NULL:QCOMCL:a740", "NULL", "a740", {}),
  ("NULL:QCOMCL:a630,IMAGE_PITCH_ALIGNMENT=64", "NULL", "a630", {"IMAGE_PITCH_ALIGNMENT": 64}),
  ("CL:QCOMCL:cl_fp64,LOCAL_SIZE=64,image_pitch_alignment=128", "CL", "cl_fp64", {"LOCAL_SIZE": 64, "IMAGE_PITCH_ALIGNMENT": 128})])
def test_dev_strings_resolve(dev: str, device: str, arch: str | None, opts: dict) -> None:
  with Context(DEV=dev):
    assert Device.DEFAULT == device
    r = Device.renderer(device)
    assert isinstance(r, QCOMCLRenderer) and r.name == "QCOMCL"
    assert r.arch == (arch or Device[device].arch)  # type: ignore[attr-defined]
    assert all(r.options[k] == v for k, v in opts.items())
    assert r.local_max == (r.options["LOCAL_SIZE"],)


@needs_cl
def test_cl_default_arch_describes_the_device() -> None:
  dev = Device["CL"]
  info = dev.info  # type: ignore[attr-defined]
  assert dev.arch == "cl" + ("_fp16" if info["fp16"] else "") + ("_fp64" if info["fp64"] else "")  # type: ignore[attr-defined]


def test_adreno_arch_features() -> None:
  a630 = QCOMCLRenderer()
  assert a630.arch == "a630" and a630.native_half and not a630.fp64
  from tinygrad.dtype import dtypes
  assert dtypes.float16 in a630.supported_dtypes and dtypes.bfloat16 in a630.supported_dtypes and dtypes.float64 not in a630.supported_dtypes


@pytest.mark.parametrize("opts,match", [(("IMAGE_PITCH=64",), "unknown QCOMCL option"), (("fp16",), "KEY=VALUE"),
                                        (("LOCAL_SIZE=0",), "positive integer"), (("IMAGE_PITCH_ALIGNMENT=48",), "power of two"),
                                        (("LOCAL_SIZE=4096",), "at most 1024")])
def test_bad_options(opts: tuple[str, ...], match: str) -> None:
  with pytest.raises(ValueError, match=match): parse_options(opts)


@needs_cl
@pytest.mark.parametrize("dev,match", [("NULL:QCOMCL:a530", "unknown arch 'a530'"), ("CL:QCOMCLL", "did you mean 'QCOMCL'")])
def test_bad_renderer_or_arch(dev: str, match: str) -> None:
  with Context(DEV=dev), pytest.raises(DeviceNotFound, match=match):
    Device.renderer(Device.DEFAULT)


def test_qcom_without_kgsl_says_so() -> None:
  import os
  if os.path.exists(KGSL_PATH): pytest.skip(f"{KGSL_PATH} exists here")
  with Context(DEV="QCOM"), pytest.raises(RuntimeError, match="no kgsl device is available"):
    Tensor([1.0, 2.0]).realize()
  assert "no kgsl device" in (registry.load().devices["QCOM"].available() or "")


@needs_cl
def test_cl_instance_out_of_range() -> None:
  with pytest.raises(RuntimeError, match=r"there is no CL device 99"): Device["CL:99"]
