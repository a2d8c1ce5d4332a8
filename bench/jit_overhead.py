"""Benchmark: per-call time of replaying a jitted function of 10 tiny kernels (16 floats): the Python overhead of a replay (us);
jit_overhead_var: the same with a bound Variable whose value changes every call (each kernel's launch is updated).

Prints one JSON object with our figure and the peers' (numpy, torch, tinygrad 0.14.0) from the same run."""
from common import main

if __name__ == "__main__": main("jit_overhead", ['jit_overhead', 'jit_overhead_var'])
