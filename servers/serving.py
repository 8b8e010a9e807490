"""The HTTP side both reference servers share: aiohttp routes, SSE streaming, Prometheus
metrics, per-request logging, the command-line flags and the SIGTERM lifecycle.

An engine (naive or batching) only turns prompt token ids into generated token ids; it
hands them over through a TokenStream. Everything a client sees is produced here, so the
two servers speak exactly the same contract.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import threading
import time
import traceback
import uuid
from typing import Any, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

import openai_contract as oc

# How often a handler waiting on the engine checks whether its client went away.
DISCONNECT_POLL_S = 0.5


def log(message: str) -> None:
    """One line to stderr, flushed at once (servers run under a supervisor that captures it)."""
    print(message, file=sys.stderr, flush=True)


class EngineFailure(Exception):
    """The engine failed a request after it was accepted."""


class TokenStream:
    """The channel for one request, from the engine to its HTTP handler.

    Methods without `_threadsafe` run on the event loop; engines working in another thread
    use the `_threadsafe` variants. `next_tokens` returns every id pushed since the last
    call (so a handler that falls behind sends fewer, larger chunks instead of a backlog),
    None once the stream has finished, and raises EngineFailure once it has failed.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, request_id: str):
        self.loop = loop
        self.request_id = request_id
        self.cancelled = threading.Event()
        self.client_gone = False
        self.finish_reason: str | None = None
        self.error: str | None = None
        self.tokens_pushed = 0
        self._pending: list[int] = []
        self._waiter: asyncio.Future | None = None
        self._closed = False

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def push(self, token_ids: list[int]) -> None:
        if self._closed or not token_ids:
            return
        self.tokens_pushed += len(token_ids)
        self._pending.extend(token_ids)
        self._wake()

    def finish(self, finish_reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        self.finish_reason = finish_reason
        self._wake()

    def fail(self, error: str) -> None:
        if self._closed:
            return
        self._closed = True
        self.error = error
        self._wake()

    @property
    def closed(self) -> bool:
        return self._closed

    def push_threadsafe(self, token_ids: list[int]) -> None:
        self.loop.call_soon_threadsafe(self.push, token_ids)

    def finish_threadsafe(self, finish_reason: str) -> None:
        self.loop.call_soon_threadsafe(self.finish, finish_reason)

    def fail_threadsafe(self, error: str) -> None:
        self.loop.call_soon_threadsafe(self.fail, error)

    async def next_tokens(self) -> list[int] | None:
        while True:
            if self._pending:
                batch, self._pending = self._pending, []
                return batch
            if self._closed:
                if self.error is not None:
                    raise EngineFailure(self.error)
                return None
            self._waiter = self.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    async def collect(self) -> list[int]:
        """Every token until the stream ends (for warm-ups)."""
        tokens: list[int] = []
        while (batch := await self.next_tokens()) is not None:
            tokens.extend(batch)
        return tokens


class Engine:
    """What a server's engine provides. Subclasses fill in the generation."""

    name = "engine"

    def __init__(self) -> None:
        self.served_model_name = "model"
        self.max_model_len = 0
        self.eos_token_ids: frozenset[int] = frozenset()
        self.info: dict[str, Any] = {}

    def load(self) -> None:
        """Load the model and tokenizer (blocking; runs in a worker thread)."""

    async def warm_up(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run one tiny generation so the first measured request pays no one-off costs."""

    def check(self, request: oc.ChatRequest) -> None:
        """Raise RequestError for requests this engine cannot honour."""

    def encode_chat(self, messages: list[dict[str, str]]) -> list[int]:
        raise NotImplementedError

    def decode(self, token_ids: list[int]) -> str:
        raise NotImplementedError

    def submit(self, stream: TokenStream, prompt_ids: list[int], max_tokens: int,
               request: oc.ChatRequest) -> None:
        """Start generating for `stream` (called on the event loop; must not block)."""
        raise NotImplementedError

    def cancel(self, stream: TokenStream) -> None:
        """Stop generating for `stream` (called on the event loop)."""
        stream.cancelled.set()

    def queue_depths(self) -> tuple[int, int]:
        """(running, waiting) requests, for the vLLM-named gauges."""
        return 0, 0

    def shutdown(self) -> None:
        """Stop background work (blocking; runs in a worker thread)."""


class Metrics:
    """vLLM-named Prometheus metrics, in a registry of their own."""

    def __init__(self, engine: Engine, served_model_name: str):
        self.registry = CollectorRegistry()
        labels = {"model_name": served_model_name}
        running = Gauge("vllm:num_requests_running", "Requests being generated.", ["model_name"],
                        registry=self.registry)
        waiting = Gauge("vllm:num_requests_waiting", "Requests waiting to be generated.", ["model_name"],
                        registry=self.registry)
        running.labels(**labels).set_function(lambda: engine.queue_depths()[0])
        waiting.labels(**labels).set_function(lambda: engine.queue_depths()[1])
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Prompt tokens processed.", ["model_name"],
                                     registry=self.registry).labels(**labels)
        self.generation_tokens = Counter("vllm:generation_tokens", "Tokens generated.", ["model_name"],
                                         registry=self.registry).labels(**labels)
        self._success = Counter("vllm:request_success", "Requests finished, by finish reason.",
                                ["model_name", "finished_reason"], registry=self.registry)
        self._failure = Counter("rehearse_server:request_failure", "Requests that ended in an error or a cancel.",
                                ["model_name", "reason"], registry=self.registry)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Server-side time to first content.",
                              ["model_name"], registry=self.registry,
                              buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80)).labels(**labels)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "Server-side request duration.",
                             ["model_name"], registry=self.registry,
                             buckets=(0.1, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120)).labels(**labels)
        self._info = Gauge("rehearse_server_info", "The reference server's engine and weights (value 1), "
                           "published once the model is loaded.",
                           ["model_name", "engine", "random_weights", "dtype"], registry=self.registry)
        self._labels = labels

    def publish_info(self, engine: Engine) -> None:
        self._info.clear()
        self._info.labels(engine=engine.name, random_weights=str(bool(engine.info.get("random_weights"))).lower(),
                          dtype=str(engine.info.get("dtype", "")), **self._labels).set(1)

    def success(self, finish_reason: str) -> None:
        self._success.labels(finished_reason=finish_reason, **self._labels).inc()

    def failure(self, reason: str) -> None:
        self._failure.labels(reason=reason, **self._labels).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class ServerState:
    """What the routes share: the engine, readiness, in-flight count and metrics."""

    def __init__(self, engine: Engine, served_model_name: str):
        self.engine = engine
        self.served_model_name = served_model_name
        self.ready = False
        self.draining = False
        self.in_flight = 0
        self.streams: set[TokenStream] = set()
        self.idle = asyncio.Event()
        self.idle.set()
        self.metrics = Metrics(engine, served_model_name)
        self.created = int(time.time())

    def mark_ready(self) -> None:
        """The model is loaded and warm: publish its description and accept requests."""
        self.metrics.publish_info(self.engine)
        self.ready = True


def _json_error(status: int, message: str, kind: str, param: str | None = None) -> web.Response:
    return web.json_response(oc.error_body(message, kind, status, param), status=status)


def _client_gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


async def _watch_client(request: web.Request, stream: TokenStream, engine: Engine) -> None:
    """Cancel the engine's work for `stream` once its client has gone away."""
    while not stream.closed:
        await asyncio.sleep(DISCONNECT_POLL_S)
        if _client_gone(request) and not stream.closed:
            stream.client_gone = True
            engine.cancel(stream)
            stream.fail("client disconnected")


async def chat_completions(request: web.Request) -> web.StreamResponse:
    state: ServerState = request.app["state"]
    engine = state.engine
    if state.draining:
        return _json_error(503, "server is shutting down", "ServiceUnavailableError")
    if not state.ready:
        return _json_error(503, "model is still loading", "ServiceUnavailableError")
    started = time.monotonic()
    try:
        body = json.loads(await request.read())
    except (ValueError, UnicodeDecodeError) as exc:
        return _json_error(400, f"request body is not valid JSON: {exc}", "BadRequestError")
    try:
        chat = oc.parse_chat_request(body)
        if chat.model is not None and chat.model != state.served_model_name:
            raise oc.RequestError(f"model {chat.model!r} does not exist; this server serves "
                                  f"{state.served_model_name!r}", "model", 404, "NotFoundError")
        engine.check(chat)
        try:
            prompt_ids = engine.encode_chat(chat.messages)
        except Exception as exc:  # a template that cannot render these messages
            raise oc.RequestError(f"chat template failed on these messages: {exc}", "messages") from exc
        max_tokens = oc.resolve_max_tokens(chat, len(prompt_ids), engine.max_model_len)
    except oc.RequestError as exc:
        return web.json_response(exc.body(), status=exc.status)

    completion_id = "chatcmpl-" + uuid.uuid4().hex
    stream = TokenStream(asyncio.get_running_loop(), completion_id)
    detok = oc.IncrementalDetokenizer(engine.decode)
    model = state.served_model_name
    created = int(time.time())
    content_events = oc.ContentEvents(completion_id, created, model)
    ttft_s: float | None = None
    status = "ok"
    error: str | None = None
    response: web.StreamResponse | None = None

    state.in_flight += 1
    state.streams.add(stream)
    state.idle.clear()
    state.metrics.prompt_tokens.inc(len(prompt_ids))
    engine.submit(stream, prompt_ids, max_tokens, chat)
    watchdog = asyncio.ensure_future(_watch_client(request, stream, engine))
    try:
        if chat.stream:
            response = web.StreamResponse(status=200, headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
                "X-Request-Id": completion_id,
            })
            await response.prepare(request)
            await response.write(oc.sse_event(oc.role_chunk(completion_id, created, model)))
        while (batch := await stream.next_tokens()) is not None:
            delta = detok.add(batch)
            if delta:
                if ttft_s is None:
                    ttft_s = time.monotonic() - started
                    state.metrics.ttft.observe(ttft_s)
                if response is not None:
                    await response.write(content_events.encode(delta))
        tail = detok.flush()
        if tail and ttft_s is None:
            ttft_s = time.monotonic() - started
            state.metrics.ttft.observe(ttft_s)
        finish_reason = stream.finish_reason or "length"
        output_tokens = len(detok.ids)
        if response is not None:
            if tail:
                await response.write(content_events.encode(tail))
            await response.write(oc.sse_event(oc.finish_chunk(completion_id, created, model, finish_reason)))
            if chat.include_usage:
                await response.write(oc.sse_event(oc.usage_chunk(completion_id, created, model,
                                                                  len(prompt_ids), output_tokens)))
            await response.write(oc.SSE_DONE)
            await response.write_eof()
            result: web.StreamResponse = response
        else:
            result = web.json_response(oc.completion_body(completion_id, created, model, detok.text,
                                                          finish_reason, len(prompt_ids), output_tokens))
        state.metrics.success(finish_reason)
        return result
    except EngineFailure as exc:
        status = "client_gone" if stream.client_gone else "cancelled" if stream.cancelled.is_set() else "engine_error"
        error = str(exc)
        state.metrics.failure(status)
        if stream.client_gone:
            return response if response is not None else web.Response(status=499)
        if response is None:
            return _json_error(500, f"generation failed: {exc}", "InternalServerError")
        # Headers are gone: report in-band and end the stream without [DONE].
        try:
            await response.write(oc.sse_event(oc.error_body(f"generation failed: {exc}",
                                                            "InternalServerError", 500)))
        except (ConnectionError, RuntimeError):
            pass
        return response
    except ConnectionError as exc:
        status, error = "client_gone", str(exc) or type(exc).__name__
        state.metrics.failure("client_gone")
        return response if response is not None else web.Response(status=499)
    except asyncio.CancelledError:
        status, error = "client_gone", "handler cancelled"
        state.metrics.failure("client_gone")
        raise
    finally:
        watchdog.cancel()
        if not stream.closed:
            engine.cancel(stream)
        state.metrics.generation_tokens.inc(len(detok.ids))
        duration_s = time.monotonic() - started
        state.metrics.e2e.observe(duration_s)
        log(oc.request_log_line(completion_id, status, len(prompt_ids), len(detok.ids), ttft_s, duration_s,
                                stream.finish_reason, error))
        state.streams.discard(stream)
        state.in_flight -= 1
        if state.in_flight == 0:
            state.idle.set()


async def health(request: web.Request) -> web.Response:
    state: ServerState = request.app["state"]
    if state.draining:
        return web.Response(status=503, text="shutting down\n")
    if not state.ready:
        return web.Response(status=503, text="loading\n")
    return web.Response(text="ok\n")


async def models(request: web.Request) -> web.Response:
    state: ServerState = request.app["state"]
    engine = state.engine
    card = {"id": state.served_model_name, "object": "model", "created": state.created,
            "owned_by": "rehearse", "root": engine.info.get("model", state.served_model_name),
            "parent": None, "max_model_len": engine.max_model_len,
            "rehearse": dict(engine.info, engine=engine.name)}
    return web.json_response({"object": "list", "data": [card]})


async def metrics(request: web.Request) -> web.Response:
    state: ServerState = request.app["state"]
    body = state.metrics.exposition()
    # aiohttp refuses a content type with parameters in content_type=; set the header whole.
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def build_app(engine: Engine, served_model_name: str) -> web.Application:
    """The aiohttp application; call from inside a running event loop."""
    app = web.Application(client_max_size=16 * 1024 * 1024)
    app["state"] = ServerState(engine, served_model_name)
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/chat/completions", chat_completions)
    return app


# --- command line and lifecycle ------------------------------------------------------------

def common_arguments(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default="Qwen/Qwen2.5-1.5B-Instruct",
                        help="local model directory or Hugging Face id looked up in the local cache "
                             "(never downloaded); with --random-weights only its name is used")
    parser.add_argument("--random-weights", action="store_true",
                        help="build the model from --architecture-config with random weights "
                             "(same compute per token, meaningless text)")
    parser.add_argument("--architecture-config", default=None,
                        help="config.json used with --random-weights "
                             "(default: servers/qwen2.5-1.5b-instruct/config.json)")
    parser.add_argument("--tokenizer-file", default=None,
                        help="tokenizer.json to use instead of the model's own tokenizer")
    parser.add_argument("--chat-template", default=None,
                        help="Jinja chat template file, used when the tokenizer has none "
                             "(default: servers/qwen2.5-1.5b-instruct/chat_template.jinja)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--dtype", default="float16", choices=("float16", "bfloat16", "float32"))
    parser.add_argument("--device", default="cuda", help="torch device (cuda, cuda:1, cpu)")
    parser.add_argument("--seed", type=int, default=0, help="seed for random weights and sampling")
    parser.add_argument("--served-model-name", default=None,
                        help="model name in responses and /v1/models (default: --model)")
    parser.add_argument("--max-model-len", type=int, default=None,
                        help="longest prompt + output in tokens (default: the config's "
                             "max_position_embeddings)")
    parser.add_argument("--shutdown-grace-s", type=float, default=2.0,
                        help="after SIGTERM, how long in-flight requests may finish before they are cancelled")
    return parser


async def _serve(engine: Engine, args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    served = args.served_model_name or args.model
    engine.served_model_name = served
    app = build_app(engine, served)
    state: ServerState = app["state"]
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    await site.start()
    log(f"{engine.name}: listening on http://{args.host}:{args.port} (health 503 until the model is warm)")

    code = 0
    startup = asyncio.ensure_future(_start_engine(engine, loop))
    stopper = asyncio.ensure_future(stop.wait())
    done, _ = await asyncio.wait({startup, stopper}, return_when=asyncio.FIRST_COMPLETED)
    if startup in done and startup.exception() is None:
        state.mark_ready()
        log(f"{engine.name}: ready, serving {served!r}" + (" with RANDOM WEIGHTS (meaningless text)"
                                                            if engine.info.get("random_weights") else ""))
        await stopper
    elif startup in done:
        exc = startup.exception()
        log(f"{engine.name}: startup failed: {type(exc).__name__}: {exc}")
        log("".join(traceback.format_exception(exc)).rstrip())
        stopper.cancel()
        code = 1
    else:
        log(f"{engine.name}: stop requested during startup")
        startup.cancel()

    # New requests get 503 from here on. The listener stays open until runner.cleanup(), which
    # waits for open handlers, so in-flight requests are finished or cancelled first.
    log(f"{engine.name}: shutting down: no new requests; {state.in_flight} in flight")
    state.draining = True
    if state.in_flight:
        try:
            await asyncio.wait_for(state.idle.wait(), args.shutdown_grace_s)
        except asyncio.TimeoutError:
            log(f"{engine.name}: cancelling {state.in_flight} in-flight requests after "
                f"{args.shutdown_grace_s:g} s")
            for stream in list(state.streams):
                if not stream.closed:
                    engine.cancel(stream)
                    stream.fail("server shutting down")
    await loop.run_in_executor(None, engine.shutdown)
    try:
        await asyncio.wait_for(state.idle.wait(), 5.0)
    except asyncio.TimeoutError:
        log(f"{engine.name}: {state.in_flight} requests still open after the engine stopped")
    await runner.cleanup()
    log(f"{engine.name}: stopped")
    return code


async def _start_engine(engine: Engine, loop: asyncio.AbstractEventLoop) -> None:
    began = time.monotonic()
    await loop.run_in_executor(None, engine.load)
    log(f"{engine.name}: model loaded in {time.monotonic() - began:.1f} s: "
        + json.dumps(engine.info, sort_keys=True))
    began = time.monotonic()
    await engine.warm_up(loop)
    log(f"{engine.name}: warm-up generation done in {time.monotonic() - began:.1f} s")


def run(engine_factory: Callable[[argparse.Namespace], Engine], parser: argparse.ArgumentParser) -> int:
    """Parse flags, build the engine, serve until SIGTERM; the process exit code."""
    args = parser.parse_args()
    if not 0 < args.port < 65536:
        parser.error(f"--port must be in 1..65535, got {args.port}")
    engine = engine_factory(args)
    return asyncio.run(_serve(engine, args))
