"""ctypes bindings for the NVIDIA kernel driver's ioctls that `NVK+NV` uses: escapes, request numbers, parameter structures.

Written from NVIDIA's open-gpu-kernel-modules (MIT), tag 580.142 (the newest 580.x tag in the snapshot; the target runs
580.159, whose RM API is the same 580 branch). Field names and order follow the headers exactly:
- kernel-open/common/inc/nv-ioctl-numbers.h (NV_IOCTL_MAGIC, NV_ESC_CARD_INFO ...), nv-ioctl.h (card info, register fd);
- src/nvidia/arch/nvalloc/unix/include/nv_escape.h (NV_ESC_RM_*), nv-unix-nvos-params-wrappers.h (NVOS33 + fd);
- src/common/sdk/nvidia/inc/nvos.h (NVOS00/02/21/33/54, NV_MEMORY_ALLOCATION_PARAMS, VA space / channel group / context
  share parameters, NVOS02/NVOS32/NVOS33 flag fields), alloc/alloc_channel.h (NV_CHANNEL_ALLOC_PARAMS), class/cl0080.h,
  cl2080.h, clb0b5sw.h (allocation parameters), ctrl/ctrl0000/ctrl0000gpu.h, ctrl/ctrl0080/ctrl0080gpu.h,
  ctrl/ctrl2080/ctrl2080gpu.h, ctrl2080gr.h, ctrla06c.h (+ ctrla06f/ctrla06fgpfifo.h), ctrlc36f.h (controls);
- kernel-open/nvidia-uvm/uvm_ioctl.h, uvm_linux_ioctl.h, uvm_types.h (UVM ioctls: plain request numbers, not _IOC).
The RM escapes go to /dev/nvidiactl (and /dev/nvidiaN) as _IOC(READ|WRITE, 'F', escape, sizeof(params)): the driver takes
the escape from the number and the size from the request (nvidia_ioctl in kernel-open/nvidia/nv.c). tests/test_nv_ioctl.py
compiles the headers with the C compiler here and checks every size, offset and number below against them.
"""
from __future__ import annotations

import ctypes

u8, u16, u32, s32, u64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64
NvHandle = u32

# ---- nv-ioctl-numbers.h / nv_escape.h
NV_IOCTL_MAGIC = ord("F")
NV_IOCTL_BASE = 200
NV_ESC_CARD_INFO = NV_IOCTL_BASE + 0
NV_ESC_REGISTER_FD = NV_IOCTL_BASE + 1
NV_ESC_CHECK_VERSION_STR = NV_IOCTL_BASE + 10
NV_ESC_ATTACH_GPUS_TO_FD = NV_IOCTL_BASE + 12
NV_ESC_RM_ALLOC_MEMORY = 0x27
NV_ESC_RM_FREE = 0x29
NV_ESC_RM_CONTROL = 0x2A
NV_ESC_RM_ALLOC = 0x2B
NV_ESC_RM_MAP_MEMORY = 0x4E
NV_ESC_RM_UNMAP_MEMORY = 0x4F
NV_MAX_DEVICES = 32
NV_MAX_SUBDEVICES = 8

# asm-generic/ioctl.h: nr in bits 0-7, type in 8-15, size in 16-29, direction in 30-31 (write 1, read 2)
_IOC_WRITE, _IOC_READ = 1, 2


def nv_request(escape: int, size: int) -> int:
  """The ioctl request number of an NV escape carrying `size` bytes (_IOC(_IOC_READ|_IOC_WRITE, 'F', escape, size))."""
  return ((_IOC_READ | _IOC_WRITE) << 30) | (size << 16) | (NV_IOCTL_MAGIC << 8) | escape


class nv_pci_info_t(ctypes.Structure):
  _fields_ = [("domain", u32), ("bus", u8), ("slot", u8), ("function", u8), ("vendor_id", u16), ("device_id", u16)]


class nv_ioctl_card_info_t(ctypes.Structure):
  _fields_ = [("valid", u8), ("pci_info", nv_pci_info_t), ("gpu_id", u32), ("interrupt_line", u16), ("reg_address", u64),
              ("reg_size", u64), ("fb_address", u64), ("fb_size", u64), ("minor_number", u32), ("dev_name", u8 * 10)]


CardInfoArray = nv_ioctl_card_info_t * NV_MAX_DEVICES  # NV_ESC_CARD_INFO fills one entry per possible device


class nv_ioctl_register_fd_t(ctypes.Structure):
  _fields_ = [("ctl_fd", ctypes.c_int)]


class nv_ioctl_rm_api_version_t(ctypes.Structure):
  _fields_ = [("cmd", u32), ("reply", u32), ("versionString", ctypes.c_char * 64)]


NV_RM_API_VERSION_CMD_QUERY = ord("2")

# ---- nvos.h
class NVOS00_PARAMETERS(ctypes.Structure):  # RM_FREE
  _fields_ = [("hRoot", NvHandle), ("hObjectParent", NvHandle), ("hObjectOld", NvHandle), ("status", u32)]


class NVOS02_PARAMETERS(ctypes.Structure):  # RM_ALLOC_MEMORY (system memory described by a host pointer)
  _fields_ = [("hRoot", NvHandle), ("hObjectParent", NvHandle), ("hObjectNew", NvHandle), ("hClass", u32), ("flags", u32),
              ("pMemory", u64), ("limit", u64), ("status", u32)]


class nv_ioctl_nvos02_parameters_with_fd(ctypes.Structure):
  _fields_ = [("params", NVOS02_PARAMETERS), ("fd", ctypes.c_int)]


class NVOS21_PARAMETERS(ctypes.Structure):  # RM_ALLOC
  _fields_ = [("hRoot", NvHandle), ("hObjectParent", NvHandle), ("hObjectNew", NvHandle), ("hClass", u32), ("pAllocParms", u64),
              ("paramsSize", u32), ("status", u32)]


class NVOS33_PARAMETERS(ctypes.Structure):  # RM_MAP_MEMORY
  _fields_ = [("hClient", NvHandle), ("hDevice", NvHandle), ("hMemory", NvHandle), ("offset", u64), ("length", u64),
              ("pLinearAddress", u64), ("status", u32), ("flags", u32)]


class nv_ioctl_nvos33_parameters_with_fd(ctypes.Structure):
  _fields_ = [("params", NVOS33_PARAMETERS), ("fd", ctypes.c_int)]


class NVOS54_PARAMETERS(ctypes.Structure):  # RM_CONTROL
  _fields_ = [("hClient", NvHandle), ("hObject", NvHandle), ("cmd", u32), ("flags", u32), ("params", u64), ("paramsSize", u32),
              ("status", u32)]


class NV_MEMORY_ALLOCATION_PARAMS(ctypes.Structure):  # NV01_MEMORY_LOCAL_USER / NV01_MEMORY_SYSTEM
  _fields_ = [("owner", u32), ("type", u32), ("flags", u32), ("width", u32), ("height", u32), ("pitch", s32), ("attr", u32),
              ("attr2", u32), ("format", u32), ("comprCovg", u32), ("zcullCovg", u32), ("rangeLo", u64), ("rangeHi", u64),
              ("size", u64), ("alignment", u64), ("offset", u64), ("limit", u64), ("address", u64), ("ctagOffset", u32),
              ("hVASpace", NvHandle), ("internalflags", u32), ("tag", u32), ("numaNode", s32)]


class NV0080_ALLOC_PARAMETERS(ctypes.Structure):
  _fields_ = [("deviceId", u32), ("hClientShare", NvHandle), ("hTargetClient", NvHandle), ("hTargetDevice", NvHandle), ("flags", u32),
              ("vaSpaceSize", u64), ("vaStartInternal", u64), ("vaLimitInternal", u64), ("vaMode", u32)]


class NV2080_ALLOC_PARAMETERS(ctypes.Structure):
  _fields_ = [("subDeviceId", u32)]


class NV_VASPACE_ALLOCATION_PARAMETERS(ctypes.Structure):
  _fields_ = [("index", u32), ("flags", u32), ("vaSize", u64), ("vaStartInternal", u64), ("vaLimitInternal", u64), ("bigPageSize", u32),
              ("vaBase", u64), ("pasid", u32)]


class NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(ctypes.Structure):
  _fields_ = [("hObjectError", NvHandle), ("hObjectEccError", NvHandle), ("hVASpace", NvHandle), ("engineType", u32),
              ("bIsCallingContextVgpuPlugin", u8)]


class NV_CTXSHARE_ALLOCATION_PARAMETERS(ctypes.Structure):
  _fields_ = [("hVASpace", NvHandle), ("flags", u32), ("subctxId", u32)]


class NV_MEMORY_DESC_PARAMS(ctypes.Structure):
  _fields_ = [("base", u64), ("size", u64), ("addressSpace", u32), ("cacheAttrib", u32)]


class NV_CHANNEL_ALLOC_PARAMS(ctypes.Structure):  # the GPFIFO channel classes (xxxx_CHANNEL_GPFIFO_A)
  _fields_ = [("hObjectError", NvHandle), ("hObjectBuffer", NvHandle), ("gpFifoOffset", u64), ("gpFifoEntries", u32), ("flags", u32),
              ("hContextShare", NvHandle), ("hVASpace", NvHandle), ("hUserdMemory", NvHandle * NV_MAX_SUBDEVICES),
              ("userdOffset", u64 * NV_MAX_SUBDEVICES), ("engineType", u32), ("cid", u32), ("subDeviceId", u32), ("hObjectEccError", NvHandle),
              ("instanceMem", NV_MEMORY_DESC_PARAMS), ("userdMem", NV_MEMORY_DESC_PARAMS), ("ramfcMem", NV_MEMORY_DESC_PARAMS),
              ("mthdbufMem", NV_MEMORY_DESC_PARAMS), ("hPhysChannelGroup", NvHandle), ("internalFlags", u32),
              ("errorNotifierMem", NV_MEMORY_DESC_PARAMS), ("eccErrorNotifierMem", NV_MEMORY_DESC_PARAMS), ("ProcessID", u32),
              ("SubProcessID", u32), ("encryptIv", u32 * 3), ("decryptIv", u32 * 3), ("hmacNonce", u32 * 8), ("tpcConfigID", u32)]


class NV_GR_ALLOCATION_PARAMETERS(ctypes.Structure):
  _fields_ = [("version", u32), ("flags", u32), ("size", u32), ("caps", u32)]


class NVB0B5_ALLOCATION_PARAMETERS(ctypes.Structure):  # the copy classes
  _fields_ = [("version", u32), ("engineType", u32)]


# ---- controls (cmd numbers: (interface id << 8) | message id, as the headers evaluate them)
NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS = 0x201
NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2 = 0x205
NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2 = 0x800292
NV2080_CTRL_CMD_GPU_GET_GID_INFO = 0x2080014A
NV2080_CTRL_CMD_GR_GET_INFO = 0x20801201
NVA06C_CTRL_CMD_GPFIFO_SCHEDULE = 0xA06C0101
NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN = 0xC36F0108


class NV0000_CTRL_GPU_GET_ATTACHED_IDS_PARAMS(ctypes.Structure):
  _fields_ = [("gpuIds", u32 * 32)]


class NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS(ctypes.Structure):
  _fields_ = [("gpuId", u32), ("gpuFlags", u32), ("deviceInstance", u32), ("subDeviceInstance", u32), ("sliStatus", u32), ("boardId", u32),
              ("gpuInstance", u32), ("numaId", s32)]


class NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS(ctypes.Structure):
  _fields_ = [("numClasses", u32), ("classList", u32 * 200)]


class NV2080_CTRL_GPU_GET_GID_INFO_PARAMS(ctypes.Structure):
  _fields_ = [("index", u32), ("flags", u32), ("length", u32), ("data", u8 * 256)]


NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY = 0x2  # NV2080_CTRL_GPU_GET_GID_FLAGS_FORMAT (1:1) = BINARY


class NVXXXX_CTRL_XXX_INFO(ctypes.Structure):  # NV2080_CTRL_GR_INFO
  _fields_ = [("index", u32), ("data", u32)]


class NV2080_CTRL_GR_ROUTE_INFO(ctypes.Structure):
  _fields_ = [("flags", u32), ("route", u64)]


class NV2080_CTRL_GR_GET_INFO_PARAMS(ctypes.Structure):
  _fields_ = [("grInfoListSize", u32), ("grInfoList", u64), ("grRouteInfo", NV2080_CTRL_GR_ROUTE_INFO)]


NV2080_CTRL_GR_INFO_INDEX_SM_VERSION = 0x0C
NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM = 0x0D
NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS = 0x14
NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC = 0x17
NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC = 0x20


class NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS(ctypes.Structure):
  _fields_ = [("bEnable", u8), ("bSkipSubmit", u8), ("bSkipEnable", u8)]


class NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS(ctypes.Structure):
  _fields_ = [("workSubmitToken", u32)]


# ---- field values (nvos.h, cl2080.h)
NV2080_ENGINE_TYPE_GRAPHICS = 0x1
NV2080_ENGINE_TYPE_COPY0 = 0x9
NV_VASPACE_ALLOCATION_INDEX_GPU_NEW = 0
NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING = 1 << 6
NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED = 1 << 3
NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC = 1
NVOS32_TYPE_IMAGE = 0
NVOS32_ATTR_PAGE_SIZE_HUGE = 3 << 23           # ATTR_PAGE_SIZE 24:23
NVOS32_ATTR_PAGE_SIZE_4KB = 1 << 23
NVOS32_ATTR_LOCATION_VIDMEM = 0 << 25          # ATTR_LOCATION 26:25
NVOS32_ATTR_LOCATION_PCI = 1 << 25
NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS = 3 << 27  # ATTR_PHYSICALITY 28:27
NVOS32_ATTR_PHYSICALITY_NONCONTIGUOUS = 1 << 27
NVOS32_ATTR_PHYSICALITY_CONTIGUOUS = 2 << 27
NVOS32_ATTR_COHERENCY_CACHED = 1 << 29         # ATTR_COHERENCY 31:29
NVOS32_ATTR_COHERENCY_UNCACHED = 0 << 29
NVOS32_ATTR2_ZBC_PREFER_NO_ZBC = 1             # ATTR2_ZBC 1:0
NVOS32_ATTR2_GPU_CACHEABLE_YES = 1 << 2        # ATTR2_GPU_CACHEABLE 3:2
NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB = 1 << 20      # ATTR2_PAGE_SIZE_HUGE 21:20
NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT = 0x1
NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE = 0x100
NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED = 0x4000
NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED = 0x8000
NVOS32_ALLOC_FLAGS_PERSISTENT_VIDMEM = 0x10000
NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS = 1 << 4  # PHYSICALITY 7:4
NVOS02_FLAGS_LOCATION_PCI = 0 << 8               # LOCATION 11:8
NVOS02_FLAGS_COHERENCY_CACHED = 1 << 12          # COHERENCY 15:12
NVOS02_FLAGS_MAPPING_NO_MAP = 1 << 30            # MAPPING 31:30
NVOS33_FLAGS_ACCESS_READ_WRITE = 0
NVOS33_FLAGS_ACCESS_WRITE_ONLY = 2
NVOS33_FLAGS_MAPPING_DIRECT = 1 << 15            # MAPPING 16:15
NVOS33_FLAGS_CACHING_TYPE_WRITECOMBINED = 2 << 23  # CACHING_TYPE 25:23
NVOS33_FLAGS_CACHING_TYPE_CACHED = 0 << 23

# ---- UVM (uvm_ioctl.h, uvm_linux_ioctl.h, uvm_types.h): the request number is the plain UVM_IOCTL_BASE(i) = i on Linux
UVM_INITIALIZE = 0x30000001
UVM_REGISTER_GPU_VASPACE = 25
UVM_REGISTER_CHANNEL = 27
UVM_MAP_EXTERNAL_ALLOCATION = 33
UVM_FREE = 34
UVM_REGISTER_GPU = 37
UVM_UNREGISTER_GPU = 38
UVM_CREATE_EXTERNAL_RANGE = 73
UVM_MM_INITIALIZE = 75
UVM_MAX_GPUS = NV_MAX_DEVICES * 8  # NV_MAX_DEVICES * UVM_PARENT_ID_MAX_SUB_PROCESSORS
UVM_INIT_FLAGS_MULTI_PROCESS_SHARING_MODE = 0x2
UvmGpuMappingTypeReadWriteAtomic = 1  # UvmGpuMappingType (nv_uvm_user_types.h)


class NvProcessorUuid(ctypes.Structure):
  _fields_ = [("uuid", u8 * 16)]


class UVM_INITIALIZE_PARAMS(ctypes.Structure):
  _fields_ = [("flags", u64), ("rmStatus", u32)]


class UVM_MM_INITIALIZE_PARAMS(ctypes.Structure):
  _fields_ = [("uvmFd", s32), ("rmStatus", u32)]


class UVM_REGISTER_GPU_PARAMS(ctypes.Structure):
  _fields_ = [("gpu_uuid", NvProcessorUuid), ("numaEnabled", u8), ("numaNodeId", s32), ("rmCtrlFd", s32), ("hClient", NvHandle),
              ("hSmcPartRef", NvHandle), ("rmStatus", u32)]


class UVM_UNREGISTER_GPU_PARAMS(ctypes.Structure):
  _fields_ = [("gpu_uuid", NvProcessorUuid), ("rmStatus", u32)]


class UVM_REGISTER_GPU_VASPACE_PARAMS(ctypes.Structure):
  _fields_ = [("gpuUuid", NvProcessorUuid), ("rmCtrlFd", s32), ("hClient", NvHandle), ("hVaSpace", NvHandle), ("rmStatus", u32)]


class UVM_CREATE_EXTERNAL_RANGE_PARAMS(ctypes.Structure):
  _fields_ = [("base", u64), ("length", u64), ("rmStatus", u32)]


class UvmGpuMappingAttributes(ctypes.Structure):
  _fields_ = [("gpuUuid", NvProcessorUuid), ("gpuMappingType", u32), ("gpuCachingType", u32), ("gpuFormatType", u32),
              ("gpuElementBits", u32), ("gpuCompressionType", u32)]


class UVM_MAP_EXTERNAL_ALLOCATION_PARAMS(ctypes.Structure):
  _fields_ = [("base", u64), ("length", u64), ("offset", u64), ("perGpuAttributes", UvmGpuMappingAttributes * UVM_MAX_GPUS),
              ("gpuAttributesCount", u64), ("rmCtrlFd", s32), ("hClient", u32), ("hMemory", u32), ("rmStatus", u32)]


class UVM_FREE_PARAMS(ctypes.Structure):
  _fields_ = [("base", u64), ("length", u64), ("rmStatus", u32)]


class UVM_REGISTER_CHANNEL_PARAMS(ctypes.Structure):  # kernel-open/nvidia-uvm/uvm_ioctl.h; RM refuses to schedule an unregistered channel
  _fields_ = [("gpuUuid", NvProcessorUuid), ("rmCtrlFd", s32), ("hClient", NvHandle), ("hChannel", NvHandle), ("base", u64), ("length", u64),
              ("rmStatus", u32)]


# the structure each UVM request carries, for checking and for the mock's dispatch
UVM_ARGS: dict[int, type[ctypes.Structure]] = {
  UVM_INITIALIZE: UVM_INITIALIZE_PARAMS, UVM_MM_INITIALIZE: UVM_MM_INITIALIZE_PARAMS, UVM_REGISTER_GPU: UVM_REGISTER_GPU_PARAMS,
  UVM_UNREGISTER_GPU: UVM_UNREGISTER_GPU_PARAMS, UVM_REGISTER_GPU_VASPACE: UVM_REGISTER_GPU_VASPACE_PARAMS,
  UVM_CREATE_EXTERNAL_RANGE: UVM_CREATE_EXTERNAL_RANGE_PARAMS, UVM_MAP_EXTERNAL_ALLOCATION: UVM_MAP_EXTERNAL_ALLOCATION_PARAMS,
  UVM_FREE: UVM_FREE_PARAMS, UVM_REGISTER_CHANNEL: UVM_REGISTER_CHANNEL_PARAMS,
}
UVM_NAMES = {UVM_INITIALIZE: "UVM_INITIALIZE", UVM_MM_INITIALIZE: "UVM_MM_INITIALIZE", UVM_REGISTER_GPU: "UVM_REGISTER_GPU",
             UVM_UNREGISTER_GPU: "UVM_UNREGISTER_GPU", UVM_REGISTER_GPU_VASPACE: "UVM_REGISTER_GPU_VASPACE",
             UVM_CREATE_EXTERNAL_RANGE: "UVM_CREATE_EXTERNAL_RANGE", UVM_MAP_EXTERNAL_ALLOCATION: "UVM_MAP_EXTERNAL_ALLOCATION",
             UVM_FREE: "UVM_FREE", UVM_REGISTER_CHANNEL: "UVM_REGISTER_CHANNEL"}
ESC_NAMES = {NV_ESC_CARD_INFO: "NV_ESC_CARD_INFO", NV_ESC_REGISTER_FD: "NV_ESC_REGISTER_FD", NV_ESC_CHECK_VERSION_STR: "NV_ESC_CHECK_VERSION_STR",
             NV_ESC_ATTACH_GPUS_TO_FD: "NV_ESC_ATTACH_GPUS_TO_FD", NV_ESC_RM_ALLOC_MEMORY: "NV_ESC_RM_ALLOC_MEMORY",
             NV_ESC_RM_FREE: "NV_ESC_RM_FREE", NV_ESC_RM_CONTROL: "NV_ESC_RM_CONTROL", NV_ESC_RM_ALLOC: "NV_ESC_RM_ALLOC",
             NV_ESC_RM_MAP_MEMORY: "NV_ESC_RM_MAP_MEMORY", NV_ESC_RM_UNMAP_MEMORY: "NV_ESC_RM_UNMAP_MEMORY"}

# ---- NV_STATUS (nvstatuscodes.h): the ones RM gives for our calls' likely mistakes, for readable errors
NV_OK = 0
NV_STATUS_NAMES = {
  0x12: "NV_ERR_GPU_UUID_NOT_FOUND", 0x17: "NV_ERR_IN_USE", 0x1A: "NV_ERR_INSUFFICIENT_RESOURCES", 0x1B: "NV_ERR_INSUFFICIENT_PERMISSIONS",
  0x1E: "NV_ERR_INVALID_ADDRESS", 0x1F: "NV_ERR_INVALID_ARGUMENT", 0x22: "NV_ERR_INVALID_CLASS", 0x24: "NV_ERR_INVALID_COMMAND",
  0x26: "NV_ERR_INVALID_DEVICE", 0x29: "NV_ERR_INVALID_FLAGS", 0x2E: "NV_ERR_INVALID_LIMIT", 0x31: "NV_ERR_INVALID_OBJECT",
  0x33: "NV_ERR_INVALID_OBJECT_HANDLE", 0x36: "NV_ERR_INVALID_OBJECT_PARENT", 0x37: "NV_ERR_INVALID_OFFSET", 0x3A: "NV_ERR_INVALID_PARAM_STRUCT",
  0x40: "NV_ERR_INVALID_STATE", 0x51: "NV_ERR_NO_MEMORY", 0x55: "NV_ERR_NOT_READY", 0x56: "NV_ERR_NOT_SUPPORTED", 0x57: "NV_ERR_OBJECT_NOT_FOUND",
  0x59: "NV_ERR_OPERATING_SYSTEM", 0x68: "NV_ERR_UVM_ADDRESS_IN_USE",
}


def status_name(status: int) -> str: return NV_STATUS_NAMES.get(status, f"NV_STATUS {status:#x}")
