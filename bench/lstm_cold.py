"""Benchmark: the first call of a jitted character-LSTM training step (8 unrolled positions, Adam) in a fresh process with an
empty compile cache: schedule + compile + run (s). Session 23 found ours at 591-656 s here (every backward kernel inlined the
unrolled history); session 24's stored shared values (schedule/recompute.py) brought it under tinygrad 0.14's figure.

Prints one JSON object with our figure and tinygrad 0.14.0's from the same run (numpy and torch compile nothing)."""
from common import main

if __name__ == "__main__": main("lstm_cold", ["lstm_cold"])
