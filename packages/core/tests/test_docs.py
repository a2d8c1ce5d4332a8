"""Every ```python block in docs/*.md runs as written.

Each block runs on its own, in a fresh namespace, with the repository root as the working directory (the
device is whatever DEV selects, the default device when it is unset). A block whose fence says
```python no-run is skipped: an excerpt that needs names defined elsewhere (backends.md quotes pieces of
examples/plugin-example this way). On the NULL device nothing can be read back, so the blocks don't run there.
"""
from __future__ import annotations

import pathlib
import re

import pytest
from tinygrad import Device, Tensor

ROOT = pathlib.Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)


def python_blocks(path: pathlib.Path) -> list[tuple[int, str, str]]:
  """(line number, info string, source) of each ```python block of a markdown file."""
  text = path.read_text()
  out = []
  for m in FENCE.finditer(text):
    info = m.group("info").strip().split()
    if info[:1] != ["python"]: continue
    out.append((text.count("\n", 0, m.start()) + 2, " ".join(info), m.group("body")))
  return out


def all_blocks() -> list:
  params = []
  for path in sorted(DOCS.glob("*.md")):
    for line, info, src in python_blocks(path):
      marks = [pytest.mark.skip(reason="marked no-run in the doc")] if "no-run" in info.split() else []
      params.append(pytest.param(path, line, src, id=f"{path.name}:{line}", marks=marks))
  return params


@pytest.fixture
def clean_state(monkeypatch: pytest.MonkeyPatch):
  """Blocks run from the repository root and may flip global switches: put those back afterwards."""
  monkeypatch.chdir(ROOT)
  training = Tensor.training
  yield
  Tensor.training = training


@pytest.mark.parametrize("path,line,src", all_blocks())
def test_doc_block_runs(path: pathlib.Path, line: int, src: str, clean_state) -> None:
  if Device.DEFAULT.startswith("NULL"): pytest.skip("the NULL device runs no kernels, and the docs read results back")
  code = compile(src, f"{path.relative_to(ROOT)}:{line}", "exec")
  exec(code, {"__name__": "__doc_block__"})


def test_docs_have_python_blocks() -> None:
  """The extraction itself: every doc is found and the fences parse (a broken fence would hide blocks)."""
  names = {p.name for p in DOCS.glob("*.md")}
  assert {"getting-started.md", "tensor-api.md", "nn.md", "jit.md", "backends.md", "architecture.md", "kernels.md"} <= names
  for path in DOCS.glob("*.md"):
    fences = [line for line in path.read_text().splitlines() if line.startswith("```")]
    assert len(fences) % 2 == 0, f"{path.name}: unbalanced ``` fences"
  assert sum(len(python_blocks(p)) for p in DOCS.glob("*.md")) >= 30


def test_extraction_skips_other_languages(tmp_path: pathlib.Path) -> None:
  md = tmp_path / "x.md"
  md.write_text("text\n```bash\necho hi\n```\n```python\nx = 1\n```\n```python no-run\nimport nope\n```\n")
  blocks = python_blocks(md)
  assert [(info, src) for _, info, src in blocks] == [("python", "x = 1\n"), ("python no-run", "import nope\n")]
  assert blocks[0][0] == 6  # the line of the block's first line of code
