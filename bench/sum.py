"""Benchmark: sum of 16M floats (GB/s: 64 MB read per call).

Prints one JSON object with our figure and the peers' (numpy, torch, tinygrad 0.14.0) from the same run."""
from common import main

if __name__ == "__main__": main("sum", ['sum'])
