"""Benchmark: float32 matmul 512/1024/2048/4096 (GFLOP/s): default heuristics, and BEAM=2 up to 2048 (its first call searches,
or reads the cache; at 4096 every candidate it times runs for about a second).

Prints one JSON object with our figure and the peers' (numpy, torch, tinygrad 0.14.0) from the same run."""
from common import main
from shapes import MATMUL_SIZES

if __name__ == "__main__":
  cases = [f"matmul_{n}" for n in MATMUL_SIZES]
  main("matmul", cases, beam=2, beam_cases=[c for c in cases if c != "matmul_4096"])
