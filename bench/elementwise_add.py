"""Benchmark: elementwise add of two 16M-float vectors (GB/s: 3 x 64 MB moved per call).

Prints one JSON object with our figure and the peers' (numpy, torch, tinygrad 0.14.0) from the same run."""
from common import main

if __name__ == "__main__": main("elementwise_add", ['add'])
