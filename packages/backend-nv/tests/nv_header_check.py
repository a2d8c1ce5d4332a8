"""Checks our ctypes bindings (nv_ioctl.py) against NVIDIA's C headers: writes a C program that prints every structure's size
and field offsets and every request/constant number, as the headers define them, compiles it with the C compiler here and
returns the values. `python packages/backend-nv/tests/nv_header_check.py OGKM_DIR > nv_header_values.json` regenerates the
golden file test_nv_ioctl.py compares against (OGKM_DIR: a checkout of NVIDIA/open-gpu-kernel-modules, tag 580.142)."""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile

from tinygrad_backend_nv import nv_ioctl as nv

INCLUDES = ["src/common/sdk/nvidia/inc", "src/common/sdk/nvidia/inc/ctrl", "kernel-open/common/inc", "src/nvidia/arch/nvalloc/unix/include",
            "kernel-open/nvidia-uvm"]
HEADERS = ["nvtypes.h", "nvos.h", "nv-ioctl.h", "nv-ioctl-numbers.h", "nv_escape.h", "nv-unix-nvos-params-wrappers.h", "alloc/alloc_channel.h",
           "class/cl0080.h", "class/cl2080.h", "class/clb0b5sw.h", "ctrl/ctrl0000/ctrl0000gpu.h", "ctrl/ctrl0080/ctrl0080gpu.h",
           "ctrl/ctrl2080/ctrl2080gpu.h", "ctrl/ctrl2080/ctrl2080gr.h", "ctrl/ctrla06c.h", "ctrl/ctrlc36f.h", "uvm_linux_ioctl.h"]
# our structure -> its C type name (the same unless the header names it through a typedef)
STRUCTS = {name: name for name in (
  "nv_ioctl_card_info_t", "nv_ioctl_register_fd_t", "nv_ioctl_rm_api_version_t", "NVOS00_PARAMETERS", "NVOS02_PARAMETERS", "NVOS21_PARAMETERS",
  "NVOS33_PARAMETERS", "nv_ioctl_nvos02_parameters_with_fd", "nv_ioctl_nvos33_parameters_with_fd", "NVOS54_PARAMETERS", "NV_MEMORY_ALLOCATION_PARAMS", "NV0080_ALLOC_PARAMETERS",
  "NV2080_ALLOC_PARAMETERS", "NV_VASPACE_ALLOCATION_PARAMETERS", "NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS", "NV_CTXSHARE_ALLOCATION_PARAMETERS",
  "NV_MEMORY_DESC_PARAMS", "NV_CHANNEL_ALLOC_PARAMS", "NV_GR_ALLOCATION_PARAMETERS", "NVB0B5_ALLOCATION_PARAMETERS",
  "NV0000_CTRL_GPU_GET_ATTACHED_IDS_PARAMS", "NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS", "NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS",
  "NV2080_CTRL_GPU_GET_GID_INFO_PARAMS", "NVXXXX_CTRL_XXX_INFO", "NV2080_CTRL_GR_ROUTE_INFO", "NV2080_CTRL_GR_GET_INFO_PARAMS",
  "NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS", "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS", "UVM_INITIALIZE_PARAMS",
  "UVM_MM_INITIALIZE_PARAMS", "UVM_REGISTER_GPU_PARAMS", "UVM_UNREGISTER_GPU_PARAMS", "UVM_REGISTER_GPU_VASPACE_PARAMS",
  "UVM_CREATE_EXTERNAL_RANGE_PARAMS", "UvmGpuMappingAttributes", "UVM_MAP_EXTERNAL_ALLOCATION_PARAMS", "UVM_FREE_PARAMS")}
CONSTANTS = [
  "NV_IOCTL_MAGIC", "NV_IOCTL_BASE", "NV_ESC_CARD_INFO", "NV_ESC_REGISTER_FD", "NV_ESC_CHECK_VERSION_STR", "NV_ESC_ATTACH_GPUS_TO_FD",
  "NV_ESC_RM_ALLOC_MEMORY", "NV_ESC_RM_FREE", "NV_ESC_RM_CONTROL", "NV_ESC_RM_ALLOC", "NV_ESC_RM_MAP_MEMORY", "NV_ESC_RM_UNMAP_MEMORY",
  "NV_MAX_DEVICES", "NV_MAX_SUBDEVICES", "NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS", "NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2",
  "NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2", "NV2080_CTRL_CMD_GPU_GET_GID_INFO", "NV2080_CTRL_CMD_GR_GET_INFO", "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE",
  "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN", "NV2080_CTRL_GR_INFO_INDEX_SM_VERSION", "NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM",
  "NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS", "NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC", "NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC",
  "NV2080_ENGINE_TYPE_GRAPHICS", "NV2080_ENGINE_TYPE_COPY0", "NV_VASPACE_ALLOCATION_INDEX_GPU_NEW", "NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING",
  "NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED", "NVOS32_TYPE_IMAGE", "NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT",
  "NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE", "NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED", "NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED",
  "NVOS32_ALLOC_FLAGS_PERSISTENT_VIDMEM", "UVM_INITIALIZE", "UVM_REGISTER_GPU_VASPACE", "UVM_REGISTER_CHANNEL", "UVM_MAP_EXTERNAL_ALLOCATION",
  "UVM_FREE", "UVM_REGISTER_GPU", "UVM_UNREGISTER_GPU", "UVM_CREATE_EXTERNAL_RANGE", "UVM_MM_INITIALIZE", "UVM_MAX_GPUS",
  "UVM_INIT_FLAGS_MULTI_PROCESS_SHARING_MODE"]
# (our name, the header's DRF field, its value name): a flag value is the value shifted to the field's low bit
FIELDS = [("NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC", "NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT", "ASYNC"),
          ("NVOS32_ATTR_PAGE_SIZE_HUGE", "NVOS32_ATTR_PAGE_SIZE", "HUGE"), ("NVOS32_ATTR_PAGE_SIZE_4KB", "NVOS32_ATTR_PAGE_SIZE", "4KB"),
          ("NVOS32_ATTR_LOCATION_VIDMEM", "NVOS32_ATTR_LOCATION", "VIDMEM"), ("NVOS32_ATTR_LOCATION_PCI", "NVOS32_ATTR_LOCATION", "PCI"),
          ("NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS", "NVOS32_ATTR_PHYSICALITY", "ALLOW_NONCONTIGUOUS"),
          ("NVOS32_ATTR_PHYSICALITY_NONCONTIGUOUS", "NVOS32_ATTR_PHYSICALITY", "NONCONTIGUOUS"),
          ("NVOS32_ATTR_PHYSICALITY_CONTIGUOUS", "NVOS32_ATTR_PHYSICALITY", "CONTIGUOUS"),
          ("NVOS33_FLAGS_ACCESS_WRITE_ONLY", "NVOS33_FLAGS_ACCESS", "WRITE_ONLY"),
          ("NVOS32_ATTR_COHERENCY_CACHED", "NVOS32_ATTR_COHERENCY", "CACHED"), ("NVOS32_ATTR_COHERENCY_UNCACHED", "NVOS32_ATTR_COHERENCY", "UNCACHED"),
          ("NVOS32_ATTR2_ZBC_PREFER_NO_ZBC", "NVOS32_ATTR2_ZBC", "PREFER_NO_ZBC"), ("NVOS32_ATTR2_GPU_CACHEABLE_YES", "NVOS32_ATTR2_GPU_CACHEABLE", "YES"),
          ("NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB", "NVOS32_ATTR2_PAGE_SIZE_HUGE", "2MB"),
          ("NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS", "NVOS02_FLAGS_PHYSICALITY", "NONCONTIGUOUS"), ("NVOS02_FLAGS_LOCATION_PCI", "NVOS02_FLAGS_LOCATION", "PCI"),
          ("NVOS02_FLAGS_COHERENCY_CACHED", "NVOS02_FLAGS_COHERENCY", "CACHED"), ("NVOS02_FLAGS_MAPPING_NO_MAP", "NVOS02_FLAGS_MAPPING", "NO_MAP"),
          ("NVOS33_FLAGS_ACCESS_READ_WRITE", "NVOS33_FLAGS_ACCESS", "READ_WRITE"), ("NVOS33_FLAGS_MAPPING_DIRECT", "NVOS33_FLAGS_MAPPING", "DIRECT"),
          ("NVOS33_FLAGS_CACHING_TYPE_WRITECOMBINED", "NVOS33_FLAGS_CACHING_TYPE", "WRITECOMBINED"),
          ("NVOS33_FLAGS_CACHING_TYPE_CACHED", "NVOS33_FLAGS_CACHING_TYPE", "CACHED")]


def ours() -> dict[str, int]:
  """Our bindings' numbers, under the keys the C program prints."""
  out: dict[str, int] = {}
  for py, _c in STRUCTS.items():
    st = getattr(nv, py)
    out[f"sizeof {py}"] = ctypes.sizeof(st)
    for f, *_ in st._fields_: out[f"offsetof {py}.{f}"] = getattr(st, f).offset
  for c in CONSTANTS: out[c] = getattr(nv, c)
  for py, _field, _val in FIELDS: out[py] = getattr(nv, py)
  return out


def c_program() -> str:
  lines = []
  for py, c in STRUCTS.items():
    lines.append(f'printf("sizeof {py} %lu\\n", (unsigned long)sizeof({c}));')
    for f, *_ in getattr(nv, py)._fields_: lines.append(f'printf("offsetof {py}.{f} %lu\\n", (unsigned long)offsetof({c}, {f}));')
  for c in CONSTANTS: lines.append(f'printf("{c} %lu\\n", (unsigned long)({c}));')
  # DRF fields are "hi:lo" tokens: `0 ? hi:lo` is lo (the ternary's false branch)
  for py, field, val in FIELDS: lines.append(f'printf("{py} %lu\\n", (unsigned long)({field}_{val}) << (0 ? {field}));')
  inc = "".join(f'#include "{h}"\n' for h in HEADERS)
  return "#include <stdio.h>\n#include <stddef.h>\n" + inc + "int main(void) {\n" + "\n".join(lines) + "\nreturn 0; }\n"


def from_headers(root: str) -> dict[str, int]:
  """Build and run the C program against the headers under `root` (an open-gpu-kernel-modules checkout)."""
  cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
  if cc is None: raise RuntimeError("no C compiler (cc/gcc/clang) to compile NVIDIA's headers with")
  with tempfile.TemporaryDirectory() as d:
    src, exe = os.path.join(d, "t.c"), os.path.join(d, "t")
    with open(src, "w") as f: f.write(c_program())
    subprocess.run([cc, *(f"-I{os.path.join(root, i)}" for i in INCLUDES), src, "-o", exe], check=True, capture_output=True, text=True)
    text = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
  return {k: int(v) for k, v in (line.rsplit(" ", 1) for line in text.splitlines())}


if __name__ == "__main__":
  json.dump(from_headers(sys.argv[1]), sys.stdout, indent=0, sort_keys=True)
  print()
