"""Benchmark: one training step of an MLP (128x784 -> 512 -> 512 -> 10, cross-entropy, SGD inline) under TinyJit, steady state (ms).

Prints one JSON object with our figure and the peers' (numpy, torch, tinygrad 0.14.0) from the same run."""
from common import main

if __name__ == "__main__": main("mlp_step", ['mlp_step'])
