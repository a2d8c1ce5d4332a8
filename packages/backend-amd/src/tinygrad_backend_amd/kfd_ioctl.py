"""ctypes bindings for the KFD ioctls the AMD runtime uses: structures and request numbers only.

Written from the kernel's uapi header include/uapi/linux/kfd_ioctl.h (KFD_IOCTL_MAJOR_VERSION 1, MINOR 11; Debian's
linux-libc-dev ships it as /usr/include/linux/kfd_ioctl.h). Field names and order follow the header exactly; the request
numbers are its AMDKFD_IOR/IOW/IOWR(nr, struct) macros, i.e. Linux's _IOC(dir, 'K', nr, sizeof(struct)) (asm-generic/ioctl.h).
"""
from __future__ import annotations

import ctypes

u32, u64 = ctypes.c_uint32, ctypes.c_uint64

KFD_IOCTL_MAJOR_VERSION = 1

KFD_IOC_QUEUE_TYPE_COMPUTE = 0x0
KFD_IOC_QUEUE_TYPE_SDMA = 0x1
KFD_IOC_QUEUE_TYPE_COMPUTE_AQL = 0x2
KFD_MAX_QUEUE_PERCENTAGE = 100
KFD_MAX_QUEUE_PRIORITY = 15
KFD_MIN_QUEUE_RING_SIZE = 1024

KFD_IOC_ALLOC_MEM_FLAGS_VRAM = 1 << 0
KFD_IOC_ALLOC_MEM_FLAGS_GTT = 1 << 1
KFD_IOC_ALLOC_MEM_FLAGS_USERPTR = 1 << 2
KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL = 1 << 3
KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE = 1 << 31
KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE = 1 << 30
KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC = 1 << 29
KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE = 1 << 28
KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM = 1 << 27
KFD_IOC_ALLOC_MEM_FLAGS_COHERENT = 1 << 26
KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED = 1 << 25


class kfd_ioctl_get_version_args(ctypes.Structure):
  _fields_ = [("major_version", u32), ("minor_version", u32)]


class kfd_ioctl_create_queue_args(ctypes.Structure):
  _fields_ = [("ring_base_address", u64), ("write_pointer_address", u64), ("read_pointer_address", u64), ("doorbell_offset", u64),
              ("ring_size", u32), ("gpu_id", u32), ("queue_type", u32), ("queue_percentage", u32), ("queue_priority", u32),
              ("queue_id", u32), ("eop_buffer_address", u64), ("eop_buffer_size", u64), ("ctx_save_restore_address", u64),
              ("ctx_save_restore_size", u32), ("ctl_stack_size", u32)]


class kfd_ioctl_destroy_queue_args(ctypes.Structure):
  _fields_ = [("queue_id", u32), ("pad", u32)]


class kfd_ioctl_acquire_vm_args(ctypes.Structure):
  _fields_ = [("drm_fd", u32), ("gpu_id", u32)]


class kfd_ioctl_alloc_memory_of_gpu_args(ctypes.Structure):
  _fields_ = [("va_addr", u64), ("size", u64), ("handle", u64), ("mmap_offset", u64), ("gpu_id", u32), ("flags", u32)]


class kfd_ioctl_free_memory_of_gpu_args(ctypes.Structure):
  _fields_ = [("handle", u64)]


class kfd_ioctl_map_memory_to_gpu_args(ctypes.Structure):
  _fields_ = [("handle", u64), ("device_ids_array_ptr", u64), ("n_devices", u32), ("n_success", u32)]


kfd_ioctl_unmap_memory_from_gpu_args = kfd_ioctl_map_memory_to_gpu_args  # "same arguments as for mapping"

# events: a signal event's slot in the events page (KFD_SIGNAL_EVENT_LIMIT 8-byte mailboxes, which the runtime allocates
# and names by handle in the first CREATE_EVENT, as libhsakmt's hsaKmtCreateEvent does for dGPUs) is where the GPU writes
# the event's trigger data before its interrupt; WAIT_EVENTS sleeps until one is signaled or the timeout (ms) passes
KFD_IOC_EVENT_SIGNAL = 0
KFD_IOC_WAIT_RESULT_COMPLETE, KFD_IOC_WAIT_RESULT_TIMEOUT, KFD_IOC_WAIT_RESULT_FAIL = 0, 1, 2
KFD_SIGNAL_EVENT_LIMIT = 4096


class kfd_ioctl_create_event_args(ctypes.Structure):
  _fields_ = [("event_page_offset", u64), ("event_trigger_data", u32), ("event_type", u32), ("auto_reset", u32), ("node_id", u32),
              ("event_id", u32), ("event_slot_index", u32)]


class kfd_ioctl_destroy_event_args(ctypes.Structure):
  _fields_ = [("event_id", u32), ("pad", u32)]


class kfd_event_data(ctypes.Structure):
  # the union of kfd_hsa_memory_exception_data (32 bytes, the largest) and kfd_hsa_hw_exception_data: filled by KFD for
  # exception events only, so kept as bytes here
  _fields_ = [("exception_data", ctypes.c_uint8 * 32), ("kfd_event_data_ext", u64), ("event_id", u32), ("pad", u32)]


class kfd_ioctl_wait_events_args(ctypes.Structure):
  _fields_ = [("events_ptr", u64), ("num_events", u32), ("wait_for_all", u32), ("timeout", u32), ("wait_result", u32)]

# asm-generic/ioctl.h: nr in bits 0-7, type in 8-15, size in 16-29, direction in 30-31 (write 1, read 2)
_IOC_WRITE, _IOC_READ = 1, 2


def _ioc(direction: int, nr: int, struct: type[ctypes.Structure]) -> int:
  return (direction << 30) | (ctypes.sizeof(struct) << 16) | (ord("K") << 8) | nr


AMDKFD_IOC_GET_VERSION = _ioc(_IOC_READ, 0x01, kfd_ioctl_get_version_args)
AMDKFD_IOC_CREATE_QUEUE = _ioc(_IOC_READ | _IOC_WRITE, 0x02, kfd_ioctl_create_queue_args)
AMDKFD_IOC_DESTROY_QUEUE = _ioc(_IOC_READ | _IOC_WRITE, 0x03, kfd_ioctl_destroy_queue_args)
AMDKFD_IOC_CREATE_EVENT = _ioc(_IOC_READ | _IOC_WRITE, 0x08, kfd_ioctl_create_event_args)
AMDKFD_IOC_DESTROY_EVENT = _ioc(_IOC_WRITE, 0x09, kfd_ioctl_destroy_event_args)
AMDKFD_IOC_WAIT_EVENTS = _ioc(_IOC_READ | _IOC_WRITE, 0x0C, kfd_ioctl_wait_events_args)
AMDKFD_IOC_ACQUIRE_VM = _ioc(_IOC_WRITE, 0x15, kfd_ioctl_acquire_vm_args)
AMDKFD_IOC_ALLOC_MEMORY_OF_GPU = _ioc(_IOC_READ | _IOC_WRITE, 0x16, kfd_ioctl_alloc_memory_of_gpu_args)
AMDKFD_IOC_FREE_MEMORY_OF_GPU = _ioc(_IOC_WRITE, 0x17, kfd_ioctl_free_memory_of_gpu_args)
AMDKFD_IOC_MAP_MEMORY_TO_GPU = _ioc(_IOC_READ | _IOC_WRITE, 0x18, kfd_ioctl_map_memory_to_gpu_args)
AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU = _ioc(_IOC_READ | _IOC_WRITE, 0x19, kfd_ioctl_unmap_memory_from_gpu_args)

# the structure each request carries, for checking and for the mock's dispatch
ARGS: dict[int, type[ctypes.Structure]] = {
  AMDKFD_IOC_GET_VERSION: kfd_ioctl_get_version_args, AMDKFD_IOC_CREATE_QUEUE: kfd_ioctl_create_queue_args,
  AMDKFD_IOC_DESTROY_QUEUE: kfd_ioctl_destroy_queue_args, AMDKFD_IOC_ACQUIRE_VM: kfd_ioctl_acquire_vm_args,
  AMDKFD_IOC_ALLOC_MEMORY_OF_GPU: kfd_ioctl_alloc_memory_of_gpu_args, AMDKFD_IOC_FREE_MEMORY_OF_GPU: kfd_ioctl_free_memory_of_gpu_args,
  AMDKFD_IOC_MAP_MEMORY_TO_GPU: kfd_ioctl_map_memory_to_gpu_args, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU: kfd_ioctl_unmap_memory_from_gpu_args,
  AMDKFD_IOC_CREATE_EVENT: kfd_ioctl_create_event_args, AMDKFD_IOC_DESTROY_EVENT: kfd_ioctl_destroy_event_args,
  AMDKFD_IOC_WAIT_EVENTS: kfd_ioctl_wait_events_args,
}
