#!/bin/bash
# usage: run.sh prog.py [args]  -> runs ours then tinygrad 0.14, CACHELEVEL=0 DEV=CPU
cd "$(dirname "$0")"
echo -n "ours: "; CACHELEVEL=0 DEV=CPU timeout 600 uv run python "$@" 2>&1 | tail -3
echo -n "tg:   "; CACHELEVEL=0 PATH=/tmp/clbin:$PATH DEV=CPU timeout 600 /tmp/tgvenv/bin/python "$@" 2>&1 | tail -3
