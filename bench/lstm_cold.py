"""Benchmark: the first call of a jitted character-LSTM training step (8 unrolled positions, Adam) in a fresh process with an
empty compile cache: schedule + compile + run (s). Ours is far slower than tinygrad 0.14 here (session 23: not fixed yet).

Prints one JSON object with our figure and tinygrad 0.14.0's from the same run (numpy and torch compile nothing)."""
from common import main

if __name__ == "__main__": main("lstm_cold", ["lstm_cold"])
