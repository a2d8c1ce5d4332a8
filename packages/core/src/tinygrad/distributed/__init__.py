"""Several processes, one model: a small process-group layer in the manner of `torch.distributed`.

    import tinygrad.distributed as dist
    dist.init()                      # reads RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT, or mpirun's variables
    g = dist.all_reduce(grad)        # sum over ranks (also all_gather, reduce_scatter, broadcast, barrier)

Backends are plugins (`register_collectives`): MPI (core, needs mpi4py) moves host memory and serves every device;
NCCL (tinygrad-backend-nv) moves CUDA buffers on the GPU's stream. `python -m tinygrad.distributed.launch -n N script.py`
starts N local processes with the torchrun variables set. See docs/distributed.md.
"""
from tinygrad.distributed.group import ProcessGroup, destroy, group, init, is_initialized
from tinygrad.distributed.ops import all_gather, all_reduce, average_gradients, barrier, broadcast, reduce_scatter
from tinygrad.distributed.store import TCPStore


def rank() -> int: return group().rank
def world_size() -> int: return group().world_size
def local_rank() -> int: return group().local_rank
def device() -> str: return group().device


__all__ = ["init", "destroy", "group", "is_initialized", "rank", "world_size", "local_rank", "device", "all_reduce", "all_gather",
           "reduce_scatter", "broadcast", "barrier", "average_gradients", "ProcessGroup", "TCPStore"]
