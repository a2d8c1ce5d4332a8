"""Our KFD bindings against the kernel's own header: a C program built with the installed clang prints the request numbers
and structure sizes from /usr/include/linux/kfd_ioctl.h (Debian linux-libc-dev), which must equal ours."""
from __future__ import annotations

import ctypes
import os
import subprocess

import pytest
from amd_harness import needs_hip
from tinygrad_backend_amd import kfd_ioctl as kfd
from tinygrad_backend_amd.toolchain import find_clang

HEADER = "/usr/include/linux/kfd_ioctl.h"
NAMES = ["GET_VERSION", "CREATE_QUEUE", "DESTROY_QUEUE", "ACQUIRE_VM", "ALLOC_MEMORY_OF_GPU", "FREE_MEMORY_OF_GPU", "MAP_MEMORY_TO_GPU",
         "UNMAP_MEMORY_FROM_GPU", "CREATE_EVENT", "DESTROY_EVENT", "WAIT_EVENTS"]
STRUCTS = ["get_version", "create_queue", "destroy_queue", "acquire_vm", "alloc_memory_of_gpu", "free_memory_of_gpu", "map_memory_to_gpu",
           "create_event", "destroy_event", "wait_events"]
FLAGS = ["VRAM", "GTT", "USERPTR", "DOORBELL", "WRITABLE", "EXECUTABLE", "PUBLIC", "NO_SUBSTITUTE", "AQL_QUEUE_MEM", "COHERENT", "UNCACHED"]


@needs_hip
@pytest.mark.skipif(not os.path.exists(HEADER), reason=f"{HEADER} is missing (apt-get install linux-libc-dev)")
def test_bindings_match_the_kernel_header(tmp_path):
  (tmp_path / "drm").mkdir()
  (tmp_path / "drm" / "drm.h").write_text("#include <linux/types.h>\n#include <linux/ioctl.h>\n")  # kfd_ioctl.h wants only its types
  lines = [f'printf("%lu\\n", (unsigned long)AMDKFD_IOC_{n});' for n in NAMES]
  lines += [f'printf("%lu\\n", (unsigned long)sizeof(struct kfd_ioctl_{s}_args));' for s in STRUCTS]
  lines += [f'printf("%lu\\n", (unsigned long)(unsigned int)KFD_IOC_ALLOC_MEM_FLAGS_{f});  /* (1 << 31) is an int */' for f in FLAGS]
  lines += ['printf("%lu\\n", (unsigned long)KFD_IOC_QUEUE_TYPE_COMPUTE_AQL);', 'printf("%lu\\n", (unsigned long)KFD_IOCTL_MAJOR_VERSION);']
  lines += ['printf("%lu\\n", (unsigned long)sizeof(struct kfd_event_data));', 'printf("%lu\\n", (unsigned long)KFD_IOC_QUEUE_TYPE_SDMA);',
            'printf("%lu\\n", (unsigned long)KFD_SIGNAL_EVENT_LIMIT);', 'printf("%lu\\n", (unsigned long)KFD_IOC_EVENT_SIGNAL);',
            'printf("%lu\\n", (unsigned long)KFD_IOC_WAIT_RESULT_TIMEOUT);']
  (tmp_path / "t.c").write_text("#include <stdio.h>\n#include <linux/kfd_ioctl.h>\nint main(void) {\n" + "\n".join(lines) + "\nreturn 0; }\n")
  subprocess.run([find_clang().path, f"-I{tmp_path}", str(tmp_path / "t.c"), "-o", str(tmp_path / "t")], check=True, capture_output=True)
  got = [int(x) for x in subprocess.run([str(tmp_path / "t")], check=True, capture_output=True, text=True).stdout.split()]
  ours = [getattr(kfd, f"AMDKFD_IOC_{n}") for n in NAMES] + [ctypes.sizeof(getattr(kfd, f"kfd_ioctl_{s}_args")) for s in STRUCTS]
  ours += [getattr(kfd, f"KFD_IOC_ALLOC_MEM_FLAGS_{f}") for f in FLAGS] + [kfd.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL, kfd.KFD_IOCTL_MAJOR_VERSION]
  ours += [ctypes.sizeof(kfd.kfd_event_data), kfd.KFD_IOC_QUEUE_TYPE_SDMA, kfd.KFD_SIGNAL_EVENT_LIMIT, kfd.KFD_IOC_EVENT_SIGNAL, kfd.KFD_IOC_WAIT_RESULT_TIMEOUT]
  assert got == ours
