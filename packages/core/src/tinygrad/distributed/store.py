"""A tiny key-value store over TCP, for processes to meet before any communicator exists (torch's TCPStore, in small).

Rank 0 serves it at MASTER_ADDR:MASTER_PORT; every rank (rank 0 too) is a client with one connection. `get` waits
until the key is set, so rank 0 can publish NCCL's unique id and the others block until it is there. Messages are
length-prefixed: a command byte, the key, the value; answers are a status byte and a value.
"""
from __future__ import annotations

import socket
import socketserver
import struct
import threading
import time

_SET, _GET, _ADD = b"S", b"G", b"A"
_OK, _TIMEOUT = b"\x00", b"\x01"


def _recv_exact(sock: socket.socket, n: int) -> bytes:
  data = bytearray()
  while len(data) < n:
    chunk = sock.recv(n - len(data))
    if not chunk: raise ConnectionError("the store's peer closed the connection")
    data += chunk
  return bytes(data)


def _send_blob(sock: socket.socket, *blobs: bytes) -> None:
  sock.sendall(b"".join(struct.pack("<Q", len(b)) + b for b in blobs))


def _recv_blob(sock: socket.socket) -> bytes: return _recv_exact(sock, struct.unpack("<Q", _recv_exact(sock, 8))[0])


class _Handler(socketserver.BaseRequestHandler):
  server: _Server

  def handle(self) -> None:
    sock, srv = self.request, self.server
    try:
      while True:
        cmd = _recv_exact(sock, 1)
        key, value = _recv_blob(sock).decode(), _recv_blob(sock)
        with srv.cond:
          if cmd == _SET:
            srv.data[key] = value
            srv.cond.notify_all()
            reply = (_OK, b"")
          elif cmd == _ADD:
            now = int(srv.data.get(key, b"0")) + int(value)
            srv.data[key] = str(now).encode()
            srv.cond.notify_all()
            reply = (_OK, srv.data[key])
          else:  # _GET: wait up to the timeout the client sent
            ok = srv.cond.wait_for(lambda k=key: k in srv.data, timeout=float(value))  # type: ignore[misc]
            reply = (_OK, srv.data[key]) if ok else (_TIMEOUT, b"")
        sock.sendall(reply[0])
        _send_blob(sock, reply[1])
    except ConnectionError: return


class _Server(socketserver.ThreadingTCPServer):
  daemon_threads, allow_reuse_address = True, True

  def __init__(self, addr: tuple[str, int]):
    self.data: dict[str, bytes] = {}
    self.cond = threading.Condition()
    super().__init__(addr, _Handler)


class TCPStore:
  """`TCPStore(host, port, is_server)`: the server (rank 0) also runs the store in a daemon thread. `timeout` bounds
  connecting and every `get`, so a rank that never arrives is an error, not a hang."""

  def __init__(self, host: str, port: int, is_server: bool, timeout: float = 300.0):
    self.host, self.port, self.timeout = host, port, timeout
    self.server: _Server | None = None
    if is_server:
      try: self.server = _Server((host, port))
      except OSError as e:
        raise RuntimeError(f"tinygrad.distributed: the store can't listen on {host}:{port} ({e}): pick a free MASTER_PORT") from e
      self.port = self.server.server_address[1]  # port 0: the OS picked one
      threading.Thread(target=self.server.serve_forever, daemon=True, name="tinygrad-store").start()
    self.sock = self._connect()
    self.lock = threading.Lock()

  def _connect(self) -> socket.socket:
    deadline = time.monotonic() + self.timeout
    while True:
      try:
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
      except OSError as e:  # rank 0 may not be listening yet
        if time.monotonic() > deadline:
          raise TimeoutError(f"tinygrad.distributed: no store at {self.host}:{self.port} after {self.timeout:.0f}s ({e}): is rank 0 running, "
                             "and do all ranks have the same MASTER_ADDR/MASTER_PORT?") from e
        time.sleep(0.05)

  def _call(self, cmd: bytes, key: str, value: bytes) -> tuple[bytes, bytes]:
    with self.lock:
      self.sock.sendall(cmd)
      _send_blob(self.sock, key.encode(), value)
      status = _recv_exact(self.sock, 1)
      return status, _recv_blob(self.sock)

  def set(self, key: str, value: bytes) -> None: self._call(_SET, key, value)

  def get(self, key: str, timeout: float | None = None) -> bytes:
    """The value of `key`, waiting until some rank sets it."""
    wait = self.timeout if timeout is None else timeout
    status, value = self._call(_GET, key, str(wait).encode())
    if status == _TIMEOUT:
      raise TimeoutError(f"tinygrad.distributed: store key {key!r} was not set within {wait:.0f}s: a rank died or never started")
    return value

  def add(self, key: str, amount: int) -> int:
    """Atomically add to a counter (missing keys are 0) and return the new value."""
    return int(self._call(_ADD, key, str(amount).encode())[1])

  def broadcast_bytes(self, key: str, data: bytes | None, root: int = 0) -> bytes:
    """The Bootstrap protocol: `root` sets the key, everyone reads it."""
    if data is not None: self.set(key, data)
    return self.get(key)

  def close(self) -> None:
    self.sock.close()
    if self.server is not None:
      self.server.shutdown()
      self.server.server_close()
