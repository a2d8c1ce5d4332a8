"""The OpenAI-compatible server, exercised with the official `openai` client against a live local server (a tiny random model
with a byte-level vocabulary and a ChatML template: its answers are gibberish, but every byte of them is a real token)."""
import http.client
import json
import threading
import time

import pytest
from live_server import CTX, start, stop

openai = pytest.importorskip("openai")

@pytest.fixture(scope="module")
def server(chat_llm):
  srv = start(chat_llm)
  yield srv
  stop(srv)


@pytest.fixture
def client(server):
  return openai.OpenAI(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="unused", max_retries=0, timeout=120)


def raw_request(server, method, path, body=None, headers=None):
  conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=120)
  conn.request(method, path, body=body, headers=headers or {})
  resp = conn.getresponse()
  data = resp.read()
  conn.close()
  return resp.status, resp.getheader("Content-Type"), data


MSG = [{"role": "user", "content": "hello"}]


def test_models(client):
  models = client.models.list()
  assert [m.id for m in models.data] == ["tiny"]


def test_completion(client):
  r = client.chat.completions.create(model="tiny", messages=MSG, max_tokens=5, temperature=0)
  assert r.object == "chat.completion" and r.choices[0].message.role == "assistant"
  assert r.usage.completion_tokens <= 5 and r.usage.prompt_tokens > 5
  assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
  assert r.choices[0].finish_reason in ("length", "stop")
  # greedy is deterministic, and max_completion_tokens works like max_tokens
  r2 = client.chat.completions.create(model="tiny", messages=MSG, max_completion_tokens=5, temperature=0)
  assert r2.choices[0].message.content == r.choices[0].message.content


def test_streaming(client):
  full = client.chat.completions.create(model="tiny", messages=MSG, max_tokens=8, temperature=0).choices[0].message.content
  stream = client.chat.completions.create(model="tiny", messages=MSG, max_tokens=8, temperature=0, stream=True,
                                          stream_options={"include_usage": True})
  chunks = list(stream)
  assert chunks[0].choices[0].delta.role == "assistant"
  text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
  assert text == full
  finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
  assert len(finishes) == 1
  assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens <= 8


def test_stop_strings(client):
  full = client.chat.completions.create(model="tiny", messages=MSG, max_tokens=12, temperature=0).choices[0].message.content
  if len(full) < 4: pytest.skip("the random model stopped too early to test stop strings")
  stop = full[2:4]
  r = client.chat.completions.create(model="tiny", messages=MSG, max_tokens=12, temperature=0, stop=[stop])
  assert r.choices[0].message.content == full[:full.index(stop)] and r.choices[0].finish_reason == "stop"
  s = client.chat.completions.create(model="tiny", messages=MSG, max_tokens=12, temperature=0, stop=stop, stream=True)
  assert "".join(c.choices[0].delta.content or "" for c in s if c.choices) == full[:full.index(stop)]


def test_sampling_with_seed(client):
  a = client.chat.completions.create(model="tiny", messages=MSG, max_tokens=6, temperature=1.0, seed=7).choices[0].message.content
  b = client.chat.completions.create(model="tiny", messages=MSG, max_tokens=6, temperature=1.0, seed=7).choices[0].message.content
  assert a == b


def test_concurrent_clients(client):
  results, errors = {}, []

  def run(i):
    try:
      msgs = [{"role": "user", "content": f"question {i}"}]
      results[i] = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=4, temperature=0).choices[0].message.content
    except Exception as e: errors.append(e)
  threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
  for t in threads: t.start()
  for t in threads: t.join(120)
  assert not errors and len(results) == 4
  # queued, never interleaved: each answer is what that prompt gives alone
  for i in range(4):
    alone = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": f"question {i}"}], max_tokens=4, temperature=0)
    assert alone.choices[0].message.content == results[i]


def test_errors(server, client):
  status, ctype, data = raw_request(server, "POST", "/v1/chat/completions", b"{not json", {"Content-Type": "application/json"})
  assert status == 400 and json.loads(data)["error"]["type"] == "invalid_request_error"
  status, _, data = raw_request(server, "POST", "/v1/chat/completions", json.dumps({"messages": []}).encode(), {"Content-Type": "application/json"})
  assert status == 400 and "messages" in json.loads(data)["error"]["message"]
  with pytest.raises(openai.BadRequestError) as e:
    client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x" * (CTX * 2)}])
  assert e.value.code == "context_length_exceeded"
  status, _, _ = raw_request(server, "GET", "/nope")
  assert status == 404
  # the server still answers
  assert client.chat.completions.create(model="tiny", messages=MSG, max_tokens=2, temperature=0).choices


def test_client_disconnect_mid_stream(server, client):
  import socket
  body = json.dumps({"messages": MSG, "stream": True, "max_tokens": 60, "temperature": 0}).encode()
  s = socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=60)
  s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)
  assert s.recv(64).startswith(b"HTTP/1.1 200")
  s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # close with a reset
  s.close()
  time.sleep(0.5)
  r = client.chat.completions.create(model="tiny", messages=MSG, max_tokens=3, temperature=0)
  assert r.choices[0].message.content is not None


def test_chat_page(server):
  status, ctype, data = raw_request(server, "GET", "/")
  assert status == 200 and ctype.startswith("text/html") and b"/v1/chat/completions" in data
