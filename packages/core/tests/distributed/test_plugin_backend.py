"""The path NCCL takes, on the CPU: ranks started by our launcher, a backend registered for the device kind (picked
by default), its bootstrap through the TCP store at MASTER_ADDR:MASTER_PORT, one device per rank (CPU:LOCAL_RANK)."""
import pathlib
import re
import subprocess
import sys

HERE = pathlib.Path(__file__).parent


def test_collectives_through_the_launcher_and_store():
  p = subprocess.run([sys.executable, "-m", "tinygrad.distributed.launch", "-n", "2", "--timeout", "200", str(HERE / "collectives_worker.py"), "store"],
                     capture_output=True, text=True, timeout=240)
  assert p.returncode == 0, p.stdout + p.stderr
  found = re.findall(r"rank (\d+): \d+ checks passed \(store on (\S+), world 2, bootstrap TCPStore\)", p.stdout)
  assert sorted(found) == [("0", "CPU"), ("1", "CPU:1")], p.stdout  # the default device: this kind's device LOCAL_RANK
