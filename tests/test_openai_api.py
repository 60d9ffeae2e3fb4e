"""labkit.serving.openai_api: the official openai client gets OpenAI's shapes from the live engine, bad requests get
OpenAI's error object, a failing model an error (not a hang), and leaving the block leaves no port and no thread."""

import http.client
import json
import socket
import threading
from urllib.parse import urlsplit

import openai
import pytest
import torch

from labkit.serving import engine, kv_cache, live, openai_api
from labkit.workloads import models

pytestmark = pytest.mark.processes  # each test starts an HTTP server

MODEL = "labkit-tinygpt"


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    return models.TinyGPT(vocab=256, max_len=128, d_model=32, n_layers=2, n_heads=2).eval()


def _engine(gpt, max_batch=4):
    return engine.Engine(gpt, kv_cache.PagedKVCache(gpt, num_blocks=64, block_size=8), max_batch=max_batch)


def _greedy(gpt, prompt, n):
    return gpt.generate(torch.tensor([prompt]), n)[0, len(prompt) :].tolist()


def _client(url):
    return openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=20)


def _port_closed(url):
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", urlsplit(url).port)) != 0


def _request(url, method, path, body=None):
    """(status, parsed JSON body) of one plain HTTP request, no client library between."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=20)
    try:
        content = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        conn.request(method, parts.path + path, content, {"Content-Type": "application/json"})
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()


def _server_threads():
    return [t for t in threading.enumerate() if t.name in ("labkit-openai-server", "labkit-live-engine")]


def test_the_openai_client_gets_completions_and_streamed_chat_with_exact_token_counts(gpt):
    tok = openai_api.ByteTokenizer()
    with live.LiveEngine(_engine(gpt)) as server, openai_api.serve(server) as url, _client(url) as client:
        assert [m.id for m in client.models.list().data] == [MODEL]
        done = client.completions.create(model=MODEL, prompt="hello", max_tokens=8, temperature=0.7)
        assert done.object == "text_completion" and done.choices[0].finish_reason == "length"
        assert done.choices[0].text == tok.decode(_greedy(gpt, tok.encode("hello"), 8))
        assert (done.usage.prompt_tokens, done.usage.completion_tokens, done.usage.total_tokens) == (5, 8, 13)
        ids = client.completions.create(model=MODEL, prompt=[104, 105], max_tokens=3)  # token ids as the prompt
        assert ids.usage.prompt_tokens == 2 and ids.choices[0].text == tok.decode(_greedy(gpt, [104, 105], 3))

        messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "héllo"}]
        chunks = list(client.chat.completions.create(model=MODEL, messages=messages, max_completion_tokens=12,
                                                     stream=True, stream_options={"include_usage": True}))  # fmt: skip
        prompt = tok.encode("system: be brief\nuser: héllo\nassistant: ")
        assert tok.chat_prompt(messages) == "system: be brief\nuser: héllo\nassistant: "
        role, *tokens, usage = chunks
        assert role.choices[0].delta.role == "assistant" and role.choices[0].delta.content == ""
        assert len(tokens) == 12 and all(c.object == "chat.completion.chunk" for c in chunks)
        assert [c.choices[0].finish_reason for c in tokens] == [None] * 11 + ["length"]
        assert "".join(c.choices[0].delta.content for c in tokens) == tok.decode(_greedy(gpt, prompt, 12))
        assert usage.choices == [] and usage.usage.completion_tokens == 12
        assert usage.usage.prompt_tokens == len(prompt) and all(c.usage is None for c in chunks[:-1])

        plain = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=4)
        assert plain.choices[0].message.content == tok.decode(_greedy(gpt, prompt, 4))
        assert plain.usage.completion_tokens == 4 and plain.object == "chat.completion"
        run = server.take_run()
        assert [r.max_tokens for r in run.records] == [8, 3, 12, 4] and all(r.ok for r in run.records)
    assert _port_closed(url) and not _server_threads()
    assert all(t.daemon for t in threading.enumerate() if t is not threading.main_thread())


def test_bad_requests_get_openais_error_object(gpt):
    def post(path, body):
        status, reply = _request(url, "POST", path, body)
        assert set(reply["error"]) == {"message", "type", "param", "code"}
        return status, reply["error"]

    ok = {"model": MODEL, "prompt": "hi"}
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    with live.LiveEngine(_engine(gpt)) as server, openai_api.serve(server) as url:
        assert post("/completions", b"{not json")[0] == 400
        assert post("/completions", b"[1, 2]")[1]["message"] == "the body must be a JSON object"
        assert post("/completions", {"prompt": "hi"})[1]["param"] == "model"
        status, error = post("/completions", {**ok, "model": "gpt-4"})
        assert status == 404 and error["code"] == "model_not_found" and "gpt-4" in error["message"]
        assert post("/completions", {**ok, "max_tokens": 0}) == (400, {"message": "max_tokens must be a whole "
            "number of at least 1, got 0", "type": "invalid_request_error", "param": "max_tokens", "code": None})  # fmt: skip
        status, error = post("/completions", {**ok, "max_tokens": 200})
        assert status == 400 and error["code"] == "context_length_exceeded" and "context of 128" in error["message"]
        assert post("/completions", {**ok, "n": 2})[1]["param"] == "n"
        assert post("/completions", {**ok, "echo": True})[1]["param"] == "echo"
        assert post("/completions", {**ok, "prompt": {"text": "hi"}})[1]["param"] == "prompt"
        assert post("/completions", {**ok, "prompt": [300]})[1]["message"] == "token ids must lie in 0..255"
        assert post("/completions", {**ok, "prompt": [300]})[1]["param"] == "prompt"
        assert "prompt is empty" in post("/completions", {**ok, "prompt": ""})[1]["message"]
        assert post("/completions", {**ok, "stream_options": {"include_usage": True}})[1]["param"] == "stream_options"
        assert post("/chat/completions", {**chat, "messages": []})[1]["param"] == "messages"
        assert (
            "role" in post("/chat/completions", {**chat, "messages": [{"role": "robot", "content": "x"}]})[1]["message"]
        )
        assert post("/chat/completions", {**chat, "max_completion_tokens": -1})[1]["param"] == "max_completion_tokens"
        assert _request(url, "GET", "/nothing")[0] == 404 and _request(url, "GET", "/completions")[0] == 405
        assert _request(url, "POST", "/completions", ok)[0] == 200  # and the server still serves
    with pytest.raises(ValueError, match="loopback"):
        with openai_api.serve(server, host="0.0.0.0"):
            pass
    with pytest.raises(ValueError, match="LiveEngine"):
        openai_api.create_app(server.engine)


def test_a_failing_model_gives_the_client_an_error_not_a_hang(gpt, monkeypatch):
    eng = _engine(gpt)

    def failing(model, seqs, tokens):
        raise RuntimeError("out of memory (simulated)")

    monkeypatch.setattr(eng.cache, "forward", failing)
    with live.LiveEngine(eng) as server, openai_api.serve(server) as url, _client(url) as client:
        with pytest.raises(openai.InternalServerError, match="simulated"):
            client.completions.create(model=MODEL, prompt="hi", max_tokens=4)
        with pytest.raises(openai.APIError, match="simulated"):
            list(client.completions.create(model=MODEL, prompt="hi", max_tokens=4, stream=True))
    assert not eng.cache.tables and _port_closed(url) and not _server_threads()
    with openai_api.serve(server) as url:  # a stopped engine: 503, not a wait
        status, reply = _request(url, "POST", "/completions", {"model": MODEL, "prompt": "hi"})
        assert status == 503 and "stopped" in reply["error"]["message"]


def test_serve_until_in_this_thread_a_disconnecting_client_and_an_error_in_the_block(gpt):
    server = live.LiveEngine(_engine(gpt))
    results = []

    def clients(url):
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=20)
        body = {"model": MODEL, "prompt": "ab", "max_tokens": 60, "stream": True}
        conn.request("POST", parts.path + "/completions", json.dumps(body), {"Content-Type": "application/json"})
        assert conn.getresponse().readline().startswith(b"data: {")  # one token, then hang up mid-stream
        conn.close()
        with _client(url) as client:
            results.append(client.completions.create(model=MODEL, prompt="cd", max_tokens=5))

    with pytest.raises(KeyboardInterrupt):
        with openai_api.serve(server) as url:
            sender = threading.Thread(target=clients, args=(url,))
            sender.start()
            server.serve_until(lambda: not sender.is_alive())  # the engine's loop in this thread
            raise KeyboardInterrupt  # leaving the block by an interrupt still shuts the server down
    assert _port_closed(url) and not _server_threads()
    assert results[0].usage.completion_tokens == 5
    run = server.take_run()  # the client that hung up: its request ran to its end anyway
    assert [(r.max_tokens, r.ok) for r in run.records] == [(60, True), (5, True)]
    assert not server.engine.cache.tables
