"""Files from URLs, downloaded once into a cache: `fetch` (as `tinygrad.fetch` and `tinygrad.helpers.fetch`), behind
`Tensor.from_url` and `tinygrad.nn.datasets`.

The cache is $DOWNLOAD_CACHE, else $XDG_CACHE_HOME/tinygrad/downloads (~/.cache/tinygrad/downloads). A download goes to a
temporary file in the cache first and takes its final name only when complete (and checked, with `sha256`), so an
interrupted one is never mistaken for the file. http(s) and file:// URLs; a local path (absolute or relative) is returned
as it is.
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import urllib.parse
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
  import tarfile

CHUNK = 1 << 20


def download_cache() -> pathlib.Path:
  """(Beside helpers.cache_dir's compile cache; not imported from there: helpers re-exports fetch from here.)"""
  if d := os.environ.get("DOWNLOAD_CACHE"): return pathlib.Path(d)
  return pathlib.Path(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")) / "tinygrad" / "downloads"


def fetch(url: str, name: pathlib.Path | str | None = None, subdir: str | None = None, gunzip: bool = False, allow_caching: bool = True,
          headers: dict[str, str] | None = None, sha256: str | None = None, extract: bool = False) -> pathlib.Path:
  """The local path of `url`'s file, downloaded into the cache once (a progress bar on stderr while it downloads).
  name: its file name in the cache (default: a hash of the URL and of `gunzip`); subdir: a folder of the cache for it.
  gunzip: stored decompressed. extract: a tar archive (.tar, .tar.gz, ...), unpacked into a folder, whose path is returned.
  sha256: the hex digest the download (as downloaded, before gunzip) must have. allow_caching=False downloads it again."""
  if url.startswith(("/", ".")) or (os.path.exists(url) and "://" not in url): return pathlib.Path(url)
  # (imported here: `import tinygrad` doesn't pay for them)
  import gzip
  import shutil
  import tarfile
  import tempfile
  scheme = urllib.parse.urlparse(url).scheme
  if scheme not in ("http", "https", "file"):
    raise ValueError(f"fetch({url!r}): not an http(s) or file:// URL, nor a local path")
  folder = download_cache() / subdir if subdir else download_cache()
  dest = folder / name if name is not None else folder / hashlib.md5((url + ("|gunzip" if gunzip else "")).encode()).hexdigest()
  if dest.exists() and allow_caching: return dest
  dest.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=dest.name + ".", suffix=".part")
  tmp = pathlib.Path(tmp_name)
  try:
    with os.fdopen(fd, "wb") as f: digest = _download(url, f, headers or {})
    if sha256 is not None and digest != sha256.lower():
      raise RuntimeError(f"fetch({url!r}): the download's sha256 is {digest}, expected {sha256}: the file changed or is corrupt")
    if gunzip:
      plain = tmp.with_suffix(".gunzip")
      try:
        with gzip.open(tmp, "rb") as src, open(plain, "wb") as out: shutil.copyfileobj(src, out, CHUNK)
      except (OSError, EOFError) as e:
        plain.unlink(missing_ok=True)
        raise RuntimeError(f"fetch({url!r}, gunzip=True): not a gzip file ({e})") from e
      os.replace(plain, tmp)
    if extract:
      unpacked = pathlib.Path(tempfile.mkdtemp(dir=dest.parent, prefix=dest.name + ".", suffix=".part"))
      try:
        with tarfile.open(tmp) as tar: _safe_extract(tar, unpacked)
      except tarfile.TarError as e:
        shutil.rmtree(unpacked, ignore_errors=True)
        raise RuntimeError(f"fetch({url!r}, extract=True): not a tar archive ({e})") from e
      tmp.unlink()
      if dest.exists(): shutil.rmtree(dest) if dest.is_dir() else dest.unlink()
      os.replace(unpacked, dest)
    else: os.replace(tmp, dest)
  finally: tmp.unlink(missing_ok=True)
  return dest


def _safe_extract(tar: tarfile.TarFile, into: pathlib.Path) -> None:
  """Unpack without paths outside `into`, devices or links out (tarfile's "data" filter; checked by hand before 3.11.4)."""
  import tarfile
  if hasattr(tarfile, "data_filter"):
    tar.extractall(into, filter="data")
    return
  root = into.resolve()
  for m in tar.getmembers():
    if not (m.isfile() or m.isdir()) or not (root / m.name).resolve().is_relative_to(root):
      raise tarfile.TarError(f"member {m.name!r} is not a plain file or folder inside the archive")
  tar.extractall(into)


def _download(url: str, f: BinaryIO, headers: dict[str, str]) -> str:
  """Copy the URL's bytes into the open file f (a progress bar for http(s)); their sha256."""
  from urllib.error import URLError
  from urllib.request import Request, urlopen  # here: http.client and ssl load only when something is downloaded
  digest = hashlib.sha256()
  try: resp = urlopen(Request(url, headers={"User-Agent": "tinygrad", **headers}), timeout=60)
  except (URLError, OSError, ValueError) as e:
    raise RuntimeError(f"fetch({url!r}): can't open it ({e}); check the URL and the network, or pass a local path") from e
  with resp:
    total = int(resp.headers.get("Content-Length") or 0) or None
    bar = None
    if not url.startswith("file:"):
      from tqdm import tqdm
      bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=os.path.basename(urllib.parse.urlparse(url).path) or url)
    try:
      while chunk := resp.read(CHUNK):
        f.write(chunk)
        digest.update(chunk)
        if bar is not None: bar.update(len(chunk))
    finally:
      if bar is not None: bar.close()
  return digest.hexdigest()
