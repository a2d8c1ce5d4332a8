"""Kernel time a step of a jitted program, from its DEBUG=2 output: the step's kernels are the repeating tail of the log
(the JIT replays), each kernel's time is its minimum over the last 5 replays (the least disturbed on a shared machine), and
their sum is the step's kernel time; the slowest kernels follow.

  CACHELEVEL=0 DEV=CPU DEBUG=2 uv run python bench/programs/cnn.py 2>&1 | python bench/programs/kernel_time.py [TOP]
"""
import re
import sys


def main() -> None:
  rows: list[tuple[str, float]] = []
  for line in sys.stdin:
    m = re.match(r"\*\*\* \S+\s+\d+ (\S+)\s+([\d.]+) us", re.sub(r"\x1b\[[0-9;]*m", "", line))
    if m: rows.append((m.group(1), float(m.group(2))))
  names = [r[0] for r in rows]
  period = next((k for k in range(1, len(names) // 3 + 1) if names[-k:] == names[-2 * k:-k] == names[-3 * k:-2 * k]), None)
  if period is None: sys.exit("no repeating replays in the log: run a jitted program for 3+ steps with DEBUG=2")
  replays = min(5, len(names) // period)
  mins = [min(rows[-(p + 1) * period + i][1] for p in range(replays)) for i in range(period)]
  print(f"kernels/step {period}  step kernel time (sum of mins over {replays} replays) {sum(mins) / 1e3:.2f} ms")
  by_name: dict[str, float] = {}
  for i in range(period): by_name[names[-period + i]] = by_name.get(names[-period + i], 0.0) + mins[i]
  for n, t in sorted(by_name.items(), key=lambda x: -x[1])[:int(sys.argv[1]) if len(sys.argv) > 1 else 8]: print(f"  {t / 1e3:8.2f} ms  {n}")


if __name__ == "__main__": main()
