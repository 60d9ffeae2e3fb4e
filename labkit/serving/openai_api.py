"""An OpenAI-compatible HTTP endpoint in front of the live engine: ``/v1/completions``, ``/v1/chat/completions``.

Taught in notebook `serving_endpoint`. :func:`serve` puts a :class:`~labkit.serving.live.LiveEngine` behind the
API that vLLM, SGLang and TensorRT-LLM all offer, so the official ``openai`` client and benchmark clients (AIPerf,
vLLM's ``benchmark_serving``) talk to it unchanged. It is FastAPI on uvicorn because vLLM's own OpenAI-compatible
server (``vllm/entrypoints/openai/api_server.py``) is built on them.

What it serves, and where it departs from OpenAI's API:

- ``GET /v1/models`` lists the one model; ``GET /health`` answers 200 while the server is up (as vLLM's does);
- ``POST /v1/completions``: ``prompt`` is a string or a list of token ids; ``max_tokens`` (default 16, OpenAI's);
  ``stream`` and ``stream_options.include_usage``; ``temperature`` and ``top_p`` are accepted, but decoding is
  always greedy; ``n`` must be 1, ``echo`` false; ``logprobs``, ``stop`` and ``suffix`` are refused;
- ``POST /v1/chat/completions``: ``messages`` (roles system, developer, user, assistant, tool; content a string
  or a list of text parts), ``max_completion_tokens`` or ``max_tokens`` (default: the rest of the context, as
  vLLM's), ``stream`` and ``stream_options`` as above;
- the model never stops early (it has no end-of-sequence token), so every request produces exactly its
  ``max_tokens`` tokens and ``finish_reason`` is always ``"length"``;
- streaming sends one server-sent event per token, ``data: {json}`` in OpenAI's chunk shapes, then (with
  ``include_usage``) a chunk with the usage and no choices, then ``data: [DONE]``. A token that ends inside a
  multi-byte UTF-8 character has empty text; the pieces always join into the whole reply's text;
- errors are OpenAI's error object, ``{"error": {"message", "type", "param", "code"}}``: 400 for a bad body or
  field, 404 for an unknown model or path, 500 when the model fails (mid-stream: an error event, then
  ``[DONE]``), 503 when the engine has stopped;
- other fields (``user``, ``seed``, ``ignore_eos``, ...) are ignored;
- a client that disconnects mid-stream does not cancel its request: the engine finishes it and it is counted in
  :meth:`~labkit.serving.live.LiveEngine.take_run` like any other (vLLM aborts it instead).
"""

from __future__ import annotations

import codecs
import contextlib
import ipaddress
import json
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException

from .live import EngineStopped, LiveEngine, TokenStream

COMPLETION_DEFAULT_TOKENS = 16  # OpenAI's default max_tokens for /v1/completions
MAX_BODY_BYTES = 1 << 20
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")
START_S = 10.0  # how long serve() waits for the server to listen
SHUTDOWN_GRACE_S = 2  # open connections get this long to finish when the server stops


class ByteTokenizer:
    """Text as UTF-8 bytes, one token per byte (ids 0..255), and a plain chat template (notebook `serving_endpoint`).

    ``encode`` gives a string's UTF-8 bytes; ``decode`` turns ids back into text, a byte sequence that is not
    UTF-8 becoming U+FFFD (``errors="replace"``). The chat template writes each message as ``"<role>: content\\n"``
    and ends with ``"assistant: "``, the turn the model is to write. With random weights (labkit's models are
    never trained) the model's bytes are gibberish: expected; the lesson is the protocol and its timing.
    """

    vocab = 256

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise ValueError(f"text to encode must be a string, got {type(text).__name__}")
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        if any(not isinstance(i, int) or not 0 <= i < self.vocab for i in ids):
            raise ValueError(f"token ids must be whole numbers in 0..{self.vocab - 1}")
        return bytes(ids).decode("utf-8", errors="replace")

    def incremental_decoder(self) -> codecs.IncrementalDecoder:
        """A decoder fed one token at a time: it holds back a character's first bytes until the rest arrive."""
        return codecs.getincrementaldecoder("utf-8")(errors="replace")

    def chat_prompt(self, messages: Sequence[dict]) -> str:
        """The chat template: ``"<role>: content\\n"`` per message, then ``"assistant: "``."""
        if not isinstance(messages, list) or not messages:
            raise ValueError("messages must be a non-empty list of {'role': ..., 'content': ...} objects")
        lines = []
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in CHAT_ROLES:
                raise ValueError(f"messages[{i}] must be an object whose role is one of {', '.join(CHAT_ROLES)}")
            content = message.get("content")
            if isinstance(content, list):  # content parts: only text ones
                if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                           for p in content):  # fmt: skip
                    raise ValueError(f"messages[{i}].content parts must be {{'type': 'text', 'text': ...}}")
                content = "".join(p["text"] for p in content)
            if not isinstance(content, str):
                raise ValueError(f"messages[{i}].content must be a string or a list of text parts")
            lines.append(f"{message['role']}: {content}\n")
        return "".join(lines) + "assistant: "


class _APIError(Exception):
    """An error reply in OpenAI's shape: its HTTP status, message, type, and the field it is about."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.type = "invalid_request_error" if status < 500 else "server_error"

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def _sse(payload: dict | str) -> str:
    return f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n"


def _whole(value, name: str, default: int | None) -> int:
    if value is None and default is not None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise _APIError(400, f"{name} must be a whole number of at least 1, got {value!r}", name)
    return value


def _failure(exc: Exception) -> _APIError:
    """A request that failed in the engine: 503 if the engine stopped, 500 if the model failed."""
    return _APIError(503, str(exc)) if isinstance(exc, EngineStopped) else _APIError(500, f"the model failed: {exc}")


def _usage(prompt: int, completion: int) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class _Endpoint:
    """The handlers, for one engine and one model name."""

    def __init__(self, live: LiveEngine, model: str, tokenizer: ByteTokenizer) -> None:
        self.live, self.model, self.tokenizer = live, model, tokenizer
        self.created = int(time.time())

    async def body(self, request: Request) -> dict:
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            raise _APIError(413, f"the body must be at most {MAX_BODY_BYTES} bytes")
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise _APIError(400, f"the body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise _APIError(400, "the body must be a JSON object")
        model = body.get("model")
        if not isinstance(model, str):
            raise _APIError(400, "'model' is required: the name of the model, a string", "model")
        if model != self.model:
            raise _APIError(404, f"The model `{model}` does not exist; this server has `{self.model}`", "model",
                           "model_not_found")  # fmt: skip
        if body.get("n") not in (None, 1):
            raise _APIError(400, f"n must be 1 (one choice per request), got {body['n']!r}", "n")
        for name in ("logprobs", "top_logprobs", "stop", "suffix"):
            if body.get(name) not in (None, False, 0, "", []):
                raise _APIError(400, f"{name} is not supported by this server", name)
        for name in ("temperature", "top_p"):
            value = body.get(name)
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
                raise _APIError(400, f"{name} must be a number (decoding is greedy whatever it is)", name)
        if not isinstance(body.get("stream", False), (bool, type(None))):
            raise _APIError(400, f"stream must be true or false, got {body['stream']!r}", "stream")
        options = body.get("stream_options")
        if options is not None and (not isinstance(options, dict) or not body.get("stream")):
            raise _APIError(400, "stream_options must be an object, and only with stream: true", "stream_options")
        return body

    def submit(self, prompt: list[int], max_tokens: int, prompt_field: str, tokens_field: str) -> TokenStream:
        try:
            return self.live.submit(prompt, max_tokens)
        except ValueError as exc:
            message = str(exc).split(": ", 1)[-1]  # without "request <id>: ", an id the client never saw
            code = "context_length_exceeded" if "exceeds the context" in message else None
            field = tokens_field if "max_tokens" in message or "blocks" in message else prompt_field
            raise _APIError(400, message, field, code) from None
        except RuntimeError as exc:
            raise _APIError(503, str(exc)) from None

    async def completions(self, request: Request):
        body = await self.body(request)
        if body.get("echo"):
            raise _APIError(400, "echo must be false: this server returns only the new text", "echo")
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]  # a batch of one prompt
        if isinstance(prompt, str):
            ids = self.tokenizer.encode(prompt)
        elif isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            ids = prompt
        else:
            raise _APIError(400, "prompt must be a string or a list of token ids (one prompt)", "prompt")
        max_tokens = _whole(body.get("max_tokens"), "max_tokens", COMPLETION_DEFAULT_TOKENS)
        return await self.reply(body, self.submit(ids, max_tokens, "prompt", "max_tokens"), chat=False)

    async def chat(self, request: Request):
        body = await self.body(request)
        try:
            ids = self.tokenizer.encode(self.tokenizer.chat_prompt(body.get("messages")))  # type: ignore[arg-type]
        except ValueError as exc:
            raise _APIError(400, str(exc), "messages") from None
        name = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
        max_tokens = _whole(body.get(name), name, max(self.live.context - len(ids), 1))
        return await self.reply(body, self.submit(ids, max_tokens, "messages", name), chat=True)

    async def reply(self, body: dict, stream: TokenStream, chat: bool):
        kind = "chatcmpl" if chat else "cmpl"
        head = {"id": f"{kind}-{uuid.uuid4().hex}", "created": int(time.time()), "model": self.model}
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = self.events(head, stream, chat, usage)
            return StreamingResponse(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        try:
            tokens = [token async for token in stream]
        except Exception as exc:
            raise _failure(exc) from None
        text = self.tokenizer.decode(tokens)
        choice: dict = {"index": 0, "logprobs": None, "finish_reason": "length"}
        choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
        return {**head, "object": "chat.completion" if chat else "text_completion", "choices": [choice],
                "usage": _usage(stream.prompt_len, len(tokens))}  # fmt: skip

    async def events(self, head: dict, stream: TokenStream, chat: bool, usage: bool) -> AsyncIterator[str]:
        head = {**head, "object": "chat.completion.chunk" if chat else "text_completion"}
        extra = {"usage": None} if usage else {}

        def chunk(text: str | None, finish: str | None, first: bool = False) -> str:
            choice: dict = {"index": 0, "logprobs": None, "finish_reason": finish}
            if chat:
                choice["delta"] = {"role": "assistant", "content": ""} if first else {"content": text}
            else:
                choice["text"] = text
            return _sse({**head, "choices": [choice], **extra})

        decoder, made = self.tokenizer.incremental_decoder(), 0
        try:
            if chat:
                yield chunk(None, None, first=True)  # OpenAI's first chunk names the role
            async for token in stream:
                made += 1
                last = made == stream.max_tokens
                yield chunk(decoder.decode(bytes([token]), final=last), "length" if last else None)
            if usage:
                yield _sse({**head, "choices": [], "usage": _usage(stream.prompt_len, made)})
        except Exception as exc:  # headers are sent: the error goes in the stream, as vLLM sends it
            yield _sse(_failure(exc).body())
        yield _sse("[DONE]")


def create_app(live: LiveEngine, model: str = "labkit-tinygpt") -> FastAPI:
    """The FastAPI application serving ``live`` as ``model`` (what :func:`serve` runs; notebook `serving_endpoint`)."""
    if not isinstance(live, LiveEngine):
        raise ValueError(f"live must be a labkit.serving.live.LiveEngine, got {type(live).__name__}")
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"model must be a non-empty name, got {model!r}")
    if live.vocab > ByteTokenizer.vocab:
        raise ValueError(f"the byte tokenizer needs a model of at most 256 token ids; this one has {live.vocab}")
    endpoint = _Endpoint(live, model, ByteTokenizer())
    app = FastAPI(title="labkit OpenAI-compatible server", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(_APIError)
    async def api_error(request: Request, exc: _APIError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:  # unknown path, wrong method
        paths = "GET /v1/models, POST /v1/completions, POST /v1/chat/completions"
        error = _APIError(
            exc.status_code, f"{exc.detail}: {request.method} {request.url.path}; this server has {paths}"
        )
        return JSONResponse(error.body(), status_code=exc.status_code)

    @app.get("/health")
    async def health() -> dict:
        return {}

    @app.get("/v1/models")
    async def models() -> dict:
        card = {"id": model, "object": "model", "created": endpoint.created, "owned_by": "labkit",
                "max_model_len": live.context}  # fmt: skip
        return {"object": "list", "data": [card]}

    app.post("/v1/completions")(endpoint.completions)
    app.post("/v1/chat/completions")(endpoint.chat)
    return app


@contextlib.contextmanager
def serve(live: LiveEngine, model: str = "labkit-tinygpt", host: str = "127.0.0.1") -> Iterator[str]:
    """Serve ``live`` over OpenAI's API for the ``with`` block; yield the base URL, ``http://127.0.0.1:PORT/v1``.

    Taught in notebook `serving_endpoint`. The port is one the OS picks; only a loopback host is allowed (the
    server has no authentication). uvicorn runs in a background thread with its own event loop, listening before
    the block starts; leaving the block (normally, by an exception or by Ctrl-C) shuts it down, gives open
    connections 2 s to finish, joins the thread and closes the port. The engine's loop must run meanwhile, either
    started (``with LiveEngine(engine) as live, serve(live) as url:``) or in this thread::

        with serve(live) as url:
            client = subprocess.Popen([...url...])
            live.serve_until(lambda: client.poll() is not None)

    Requests that come while no loop runs wait for one.
    """
    app = create_app(live, model)
    try:
        loopback = isinstance(host, str) and (host == "localhost" or ipaddress.ip_address(host).is_loopback)
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"host must be a loopback address (127.0.0.1, ::1 or localhost), got {host!r}: the server "
                         "has no authentication, so it listens on this machine only")  # fmt: skip
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP, and without it each
    # streamed chunk waits for the client's delayed ACK (tens of milliseconds), which ruins TTFT and ITL.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.bind((host, 0))
        sock.listen(256)
        config = uvicorn.Config(app, log_config=None, log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=SHUTDOWN_GRACE_S)  # fmt: skip
        server = uvicorn.Server(config)
        failed: list[BaseException] = []

        def run() -> None:
            try:
                server.run(sockets=[sock])
            except BaseException as exc:  # reported by serve(), in the caller's thread
                failed.append(exc)

        thread = threading.Thread(target=run, name="labkit-openai-server", daemon=True)
        thread.start()
    except BaseException:
        sock.close()
        raise
    try:
        deadline = time.monotonic() + START_S
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not server.started:
            raise RuntimeError(
                f"the server did not start within {START_S:g} s" + (f": {failed[0]!r}" if failed else "")
            )
        port = sock.getsockname()[1]
        yield f"http://{'[' + host + ']' if ':' in host else host}:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(START_S + SHUTDOWN_GRACE_S)
        if thread.is_alive():
            server.force_exit = True
            thread.join(START_S)
        sock.close()
