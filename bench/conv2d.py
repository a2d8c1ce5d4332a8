"""Benchmark: conv2d: batch 8, 64->64 channels, 56x56, 3x3, padding 1 (GFLOP/s); ours with the heuristics and with BEAM=2.

Prints one JSON object with our figure and the peers' (numpy, torch, tinygrad 0.14.0) from the same run."""
from common import main

if __name__ == "__main__": main("conv2d", ['conv2d'], beam=2)
