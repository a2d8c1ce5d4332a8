"""Benchmark: float32 matmul 512/1024/2048 (GFLOP/s): default heuristics and BEAM=2 (its first call searches, or reads the cache).

Prints one JSON object with our figure and the peers' (numpy, torch, tinygrad 0.14.0) from the same run."""
from common import main

if __name__ == "__main__": main("matmul", ['matmul_512', 'matmul_1024', 'matmul_2048'], beam=2)
