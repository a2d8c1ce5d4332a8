"""The TCP store and the launcher, without MPI: threads and processes meeting at MASTER_ADDR:MASTER_PORT."""
import re
import subprocess
import sys
import threading

import pytest
from tinygrad.distributed.env import master_address, process_env
from tinygrad.distributed.launch import free_port, worker_env
from tinygrad.distributed.store import TCPStore


def test_set_get_add_and_waiting_get():
  server = TCPStore("127.0.0.1", 0, is_server=True, timeout=30)
  client = TCPStore("127.0.0.1", server.port, is_server=False, timeout=30)
  got: list[bytes] = []
  waiter = threading.Thread(target=lambda: got.append(client.get("id")))
  waiter.start()  # blocks in get until rank 0 sets the key
  server.set("id", b"\x00\x01" * 64)
  waiter.join(30)
  assert got == [b"\x00\x01" * 64]
  assert server.broadcast_bytes("x", b"abc") == b"abc"
  assert client.broadcast_bytes("x", None) == b"abc"
  assert [server.add("n", 1), client.add("n", 2)] == [1, 3]
  client.close()
  server.close()


def test_get_of_a_missing_key_times_out_with_an_explanation():
  server = TCPStore("127.0.0.1", 0, is_server=True, timeout=30)
  with pytest.raises(TimeoutError, match="was not set"): server.get("never", timeout=0.2)
  server.close()


def test_no_store_is_a_clear_error():
  with pytest.raises(TimeoutError, match="MASTER_ADDR/MASTER_PORT"): TCPStore("127.0.0.1", free_port(), is_server=False, timeout=0.3)


def test_env_from_torchrun_and_mpi_variables(monkeypatch):
  for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMIX_SIZE"):
    monkeypatch.delenv(k, raising=False)
  assert (process_env().rank, process_env().world_size) == (0, 1)
  monkeypatch.setenv("PMI_RANK", "2"); monkeypatch.setenv("PMI_SIZE", "3")
  e = process_env()
  assert (e.rank, e.world_size, e.local_rank, e.mpi) == (2, 3, 2, True)
  monkeypatch.setenv("RANK", "1"); monkeypatch.setenv("WORLD_SIZE", "2"); monkeypatch.setenv("LOCAL_RANK", "0")
  e = process_env()
  assert (e.rank, e.world_size, e.local_rank, e.mpi) == (1, 2, 0, False)
  monkeypatch.setenv("RANK", "5")
  with pytest.raises(ValueError, match="outside"): process_env()
  assert master_address("tcp://10.0.0.1:1234") == ("10.0.0.1", 1234)
  monkeypatch.delenv("MASTER_ADDR", raising=False)
  with pytest.raises(RuntimeError, match="MASTER_ADDR"): master_address(None)


def test_worker_env_sets_torchrun_variables():
  env = worker_env(1, 3, 4567, base={})
  assert {k: env[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "NCCL_NVLS_ENABLE")} == \
    {"RANK": "1", "WORLD_SIZE": "3", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "4567", "NCCL_NVLS_ENABLE": "0"}


EXCHANGE = """
import os
from tinygrad.distributed.store import TCPStore
rank = int(os.environ["RANK"])
store = TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_server=rank == 0, timeout=60)
uid = store.broadcast_bytes("uid", bytes(range(128)) if rank == 0 else None)
assert uid == bytes(range(128))
store.add("done", 1)
if rank == 0: store.get("all", timeout=60)  # rank 0 keeps serving until everyone read the id
elif store.add("left", 1) == int(os.environ["WORLD_SIZE"]) - 1: store.set("all", b"1")
print("ok", rank, flush=True)
"""


def test_launcher_runs_ranks_that_exchange_an_id_through_the_store(tmp_path):
  script = tmp_path / "exchange.py"
  script.write_text(EXCHANGE)
  p = subprocess.run([sys.executable, "-m", "tinygrad.distributed.launch", "-n", "3", "--timeout", "120", str(script)],
                     capture_output=True, text=True, timeout=180)
  assert p.returncode == 0, p.stderr
  # each rank's line, wherever other output (a library's notice) lands around it
  ranks = sorted(int(m) for m in re.findall(r"^ok (\d+)$", p.stdout, re.MULTILINE))
  assert ranks == [0, 1, 2], f"stdout: {p.stdout!r}\nstderr: {p.stderr!r}"


def test_launcher_returns_the_failing_rank_code(tmp_path):
  script = tmp_path / "fail.py"
  script.write_text("import os, sys, time\nif os.environ['RANK'] == '1': sys.exit(3)\ntime.sleep(60)\n")
  p = subprocess.run([sys.executable, "-m", "tinygrad.distributed.launch", "-n", "2", str(script)], capture_output=True, text=True, timeout=120)
  assert p.returncode == 3 and "exit codes by rank" in p.stderr


def test_launcher_keeps_each_ranks_lines_whole(tmp_path):
  """Ranks that write a line character by character (unbuffered stdout) still come out one whole line each."""
  script = tmp_path / "pieces.py"
  script.write_text("import os, sys\nfor i in range(50):\n  for ch in f\"rank{os.environ['RANK']} line{i}\\n\":\n"
                    "    sys.stdout.write(ch); sys.stdout.flush()\n")
  p = subprocess.run([sys.executable, "-m", "tinygrad.distributed.launch", "-n", "3", str(script)], capture_output=True, text=True, timeout=120)
  assert p.returncode == 0, p.stderr
  lines = p.stdout.splitlines()
  assert sorted(lines) == sorted(f"rank{r} line{i}" for r in range(3) for i in range(50)), p.stdout
