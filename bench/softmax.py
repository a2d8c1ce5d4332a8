"""Benchmark: softmax over the rows of a 4096x4096 float32 matrix (GB/s: input read + output written once).

Prints one JSON object with our figure and the peers' (numpy, torch, tinygrad 0.14.0) from the same run."""
from common import main

if __name__ == "__main__": main("softmax", ['softmax'])
