"""The AQL side of the GPU: the kernel dispatch packet, the signal and the queue words the packet processor reads.

From ROCm's ROCR-Runtime headers (github:ROCm/ROCR-Runtime, runtime/hsa-runtime/inc/hsa.h for the packet and its header
bits, inc/amd_hsa_signal.h for amd_signal_t, inc/amd_hsa_queue.h for amd_queue_t). Only the fields we use are named;
offsets are the headers' (amd_queue_t's by counting its fields: the hsa_queue_t, reserved words, dispatch ids).
"""
from __future__ import annotations

import ctypes

# hsa_packet_type_t
PACKET_TYPE_VENDOR_SPECIFIC, PACKET_TYPE_INVALID, PACKET_TYPE_KERNEL_DISPATCH, PACKET_TYPE_BARRIER_AND = 0, 1, 2, 3
# hsa_packet_header_t: bit offsets in the 16-bit header
HEADER_TYPE, HEADER_BARRIER, HEADER_ACQUIRE_FENCE_SCOPE, HEADER_RELEASE_FENCE_SCOPE = 0, 8, 9, 11
# hsa_fence_scope_t
FENCE_SCOPE_NONE, FENCE_SCOPE_AGENT, FENCE_SCOPE_SYSTEM = 0, 1, 2
SETUP_DIMENSIONS = 0  # hsa_kernel_dispatch_packet_setup_t: the number of grid dimensions, bits 0-1 of `setup`


class KernelDispatchPacket(ctypes.Structure):  # hsa_kernel_dispatch_packet_t, 64 bytes
  _fields_ = [("header", ctypes.c_uint16), ("setup", ctypes.c_uint16), ("workgroup_size_x", ctypes.c_uint16),
              ("workgroup_size_y", ctypes.c_uint16), ("workgroup_size_z", ctypes.c_uint16), ("reserved0", ctypes.c_uint16),
              ("grid_size_x", ctypes.c_uint32), ("grid_size_y", ctypes.c_uint32), ("grid_size_z", ctypes.c_uint32),
              ("private_segment_size", ctypes.c_uint32), ("group_segment_size", ctypes.c_uint32), ("kernel_object", ctypes.c_uint64),
              ("kernarg_address", ctypes.c_uint64), ("reserved2", ctypes.c_uint64), ("completion_signal", ctypes.c_uint64)]


class BarrierAndPacket(ctypes.Structure):  # hsa_barrier_and_packet_t, 64 bytes
  _fields_ = [("header", ctypes.c_uint16), ("reserved0", ctypes.c_uint16), ("reserved1", ctypes.c_uint32),
              ("dep_signal", ctypes.c_uint64 * 5), ("reserved2", ctypes.c_uint64), ("completion_signal", ctypes.c_uint64)]


PACKET_SIZE = 64
assert ctypes.sizeof(KernelDispatchPacket) == ctypes.sizeof(BarrierAndPacket) == PACKET_SIZE


def header(kind: int, barrier: bool = True, acquire: int = FENCE_SCOPE_SYSTEM, release: int = FENCE_SCOPE_SYSTEM) -> int:
  return (kind << HEADER_TYPE) | (int(barrier) << HEADER_BARRIER) | (acquire << HEADER_ACQUIRE_FENCE_SCOPE) | (release << HEADER_RELEASE_FENCE_SCOPE)


class AmdSignal(ctypes.Structure):  # amd_signal_t, 64 bytes, 64-byte aligned
  _fields_ = [("kind", ctypes.c_int64), ("value", ctypes.c_int64), ("event_mailbox_ptr", ctypes.c_uint64), ("event_id", ctypes.c_uint32),
              ("reserved1", ctypes.c_uint32), ("start_ts", ctypes.c_uint64), ("end_ts", ctypes.c_uint64), ("queue_ptr", ctypes.c_uint64),
              ("reserved3", ctypes.c_uint32 * 2)]


AMD_SIGNAL_KIND_USER = 1
SIGNAL_SIZE = 64
assert ctypes.sizeof(AmdSignal) == SIGNAL_SIZE

# amd_queue_t (256 bytes, 64-byte aligned): the packet processor's write and read dispatch ids; KFD's create-queue takes
# their addresses as the queue's write/read pointers
AMD_QUEUE_SIZE = 256
AMD_QUEUE_WRITE_DISPATCH_ID = 56
AMD_QUEUE_READ_DISPATCH_ID = 128
AMD_QUEUE_PROPERTIES = 180                # after the scratch fields; bit 1: AMD_QUEUE_PROPERTIES_ENABLE_PROFILING
AMD_QUEUE_PROPERTIES_ENABLE_PROFILING = 1 << 1
TIMESTAMP_HZ = 100_000_000                # the GPU timestamp counter (start_ts/end_ts) ticks at 100 MHz
