"""Benchmark: the first call of that MLP step in a fresh process with an empty compile cache: schedule + compile + run (s).

Prints one JSON object with our figure and the peers' (numpy, torch, tinygrad 0.14.0) from the same run."""
from common import main

if __name__ == "__main__": main("mlp_cold", ['mlp_cold'])
