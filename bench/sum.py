"""Benchmark: sum of 16M floats, column sums of a 4096x4096 matrix and a vector times it stored (K, N) (GB/s: 64 MB read per
call each).

Prints one JSON object with our figure and the peers' (numpy, torch, tinygrad 0.14.0) from the same run."""
from common import main

if __name__ == "__main__": main("sum", ['sum', 'sum_axis0', 'vecmat'])
