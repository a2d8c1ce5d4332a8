"""Where a process learns its rank: the arguments, else what torchrun / our launcher set (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT), else what mpirun set (Open MPI's OMPI_COMM_WORLD_*, MPICH/Hydra's PMI_*), else a group of one."""
from __future__ import annotations

import os
from dataclasses import dataclass

# (rank, world size, local rank) variables of each launcher, in the order they are tried
_LAUNCHERS = (
  ("RANK", "WORLD_SIZE", "LOCAL_RANK"),                                            # torchrun, tinygrad.distributed.launch
  ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),   # Open MPI
  ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),                                      # MPICH (Hydra), Intel MPI
  ("PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK"),
)


@dataclass(frozen=True)
class ProcessEnv:
  rank: int
  world_size: int
  local_rank: int
  launcher: str  # the variable the rank came from ("" when there was none), for error messages
  mpi: bool      # started by an MPI launcher

  def __post_init__(self) -> None:
    if not 0 <= self.rank < self.world_size:
      raise ValueError(f"tinygrad.distributed: rank {self.rank} is outside 0..{self.world_size - 1} (world size {self.world_size}"
                       f"{', from ' + self.launcher if self.launcher else ''})")


def _int(name: str) -> int:
  try: return int(os.environ[name])
  except ValueError as e: raise ValueError(f"tinygrad.distributed: {name}={os.environ[name]!r} is not an integer") from e


def process_env(rank: int | None = None, world_size: int | None = None) -> ProcessEnv:
  for rank_var, size_var, local_var in _LAUNCHERS:
    if rank_var in os.environ and size_var in os.environ:
      local = _int(local_var) if local_var in os.environ else _int(rank_var)
      return ProcessEnv(_int(rank_var) if rank is None else rank, _int(size_var) if world_size is None else world_size, local,
                        rank_var, rank_var != "RANK")
  if (rank is None) != (world_size is None):
    raise ValueError("tinygrad.distributed.init: give both rank and world_size, or neither (then RANK/WORLD_SIZE or mpirun's variables are read)")
  return ProcessEnv(rank or 0, world_size or 1, rank or 0, "", False)


def master_address(init_method: str | None) -> tuple[str, int]:
  """(host, port) of rank 0's store: from `tcp://host:port`, else MASTER_ADDR / MASTER_PORT."""
  if init_method and init_method.startswith("tcp://"):
    host, _, port = init_method[len("tcp://"):].rpartition(":")
    if not host or not port.isdigit(): raise ValueError(f"tinygrad.distributed: init_method {init_method!r} is not tcp://HOST:PORT")
    return host, int(port)
  if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
    raise RuntimeError("tinygrad.distributed: rank 0's address is unknown: set MASTER_ADDR and MASTER_PORT (torchrun and "
                       "`python -m tinygrad.distributed.launch` do), pass init_method='tcp://HOST:PORT', or start with mpirun")
  return os.environ["MASTER_ADDR"], _int("MASTER_PORT")
