"""Our NVIDIA driver bindings (nv_ioctl.py) against NVIDIA's own headers. nv_header_values.json holds every structure size,
field offset and number as the C compiler computed them from open-gpu-kernel-modules 580.142's headers (regenerate:
nv_header_check.py); with NV_OGKM_DIR set to such a checkout the headers are compiled again here and compared too."""
from __future__ import annotations

import ctypes
import json
import os

import pytest
from nv_header_check import FIELDS, STRUCTS, from_headers, ours
from tinygrad_backend_nv import nv_ioctl as nv

GOLDEN = os.path.join(os.path.dirname(__file__), "nv_header_values.json")


def test_bindings_match_the_golden_header_values() -> None:
  with open(GOLDEN) as f: golden = json.load(f)
  mine = ours()
  assert set(mine) == set(golden), "nv_header_check.py and nv_header_values.json list different names: regenerate the JSON"
  assert {k: v for k, v in mine.items() if golden[k] != v} == {}


def test_golden_file_covers_every_structure_and_flag() -> None:
  with open(GOLDEN) as f: golden = json.load(f)
  assert all(f"sizeof {s}" in golden for s in STRUCTS) and all(py in golden for py, *_ in FIELDS)
  assert golden["sizeof NV_CHANNEL_ALLOC_PARAMS"] == 368 and golden["sizeof UVM_MAP_EXTERNAL_ALLOCATION_PARAMS"] == 9264


@pytest.mark.skipif(not os.environ.get("NV_OGKM_DIR"), reason="set NV_OGKM_DIR to an open-gpu-kernel-modules checkout (tag 580.142) to compile its headers")
def test_bindings_match_the_headers_compiled_here() -> None:
  assert from_headers(os.environ["NV_OGKM_DIR"]) == ours()


def test_request_numbers() -> None:
  # _IOC(READ|WRITE, 'F', escape, size): the size travels in the request, so the driver knows the structure
  assert nv.nv_request(nv.NV_ESC_RM_ALLOC, ctypes.sizeof(nv.NVOS21_PARAMETERS)) == 0xC020462B
  assert nv.nv_request(nv.NV_ESC_RM_CONTROL, ctypes.sizeof(nv.NVOS54_PARAMETERS)) == 0xC020462A
  assert nv.nv_request(nv.NV_ESC_CARD_INFO, ctypes.sizeof(nv.CardInfoArray)) == 0xC90046C8
  assert nv.UVM_INITIALIZE == 0x30000001 and nv.UVM_MAP_EXTERNAL_ALLOCATION == 33
