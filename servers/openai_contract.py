"""The OpenAI chat-completions contract both reference servers speak, as pure functions.

Request validation, streamed chunk and response bodies, SSE framing, incremental
detokenization and the per-request log line. Standard library only, so it is unit-tested
on a machine without torch or aiohttp.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

# Roles the chat template knows how to render.
ROLES = ("system", "user", "assistant", "tool")

# Fields this server reads; anything else in a request is accepted and ignored, as vLLM does,
# except the fields in UNSUPPORTED, which would change the output and so are refused.
UNSUPPORTED = ("tools", "tool_choice", "logprobs", "top_logprobs", "response_format", "logit_bias")


class RequestError(Exception):
    """A request the server refuses, with the HTTP status and the offending field."""

    def __init__(self, message: str, param: str | None = None, status: int = 400,
                 kind: str = "BadRequestError"):
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status
        self.kind = kind

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.kind, self.status, self.param)


def error_body(message: str, kind: str, status: int, param: str | None = None) -> dict[str, Any]:
    """The OpenAI error object: {"error": {message, type, param, code}}."""
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


@dataclass
class ChatRequest:
    """A validated chat-completions request."""

    messages: list[dict[str, str]]
    model: str | None
    max_tokens: int | None  # None: up to the model's context length
    temperature: float | None  # None: the server's default, greedy decoding
    top_p: float
    seed: int | None
    stream: bool
    include_usage: bool
    ignore_eos: bool
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def greedy(self) -> bool:
        return not self.temperature


def _number(body: dict[str, Any], name: str, default: float | None, lo: float, hi: float) -> float | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RequestError(f"{name} must be a number, got {value!r}", name)
    if value < lo or value > hi:
        raise RequestError(f"{name} must be in [{lo:g}, {hi:g}], got {value!r}", name)
    return float(value)


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise RequestError(f"{name} must be true or false, got {value!r}", name)
    return value


def _content_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise RequestError(f"{where}.content[{i}] must be a text part "
                                   f"{{\"type\": \"text\", \"text\": ...}}", f"{where}.content")
            parts.append(part["text"])
        return "".join(parts)
    raise RequestError(f"{where}.content must be a string or a list of text parts, got {type(content).__name__}",
                       f"{where}.content")


def parse_chat_request(body: Any) -> ChatRequest:
    """Validate a decoded JSON body; raise RequestError naming the field on bad input."""
    if not isinstance(body, dict):
        raise RequestError(f"request body must be a JSON object, got {type(body).__name__}")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list", "messages")
    parsed: list[dict[str, str]] = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise RequestError(f"{where} must be an object", where)
        role = message.get("role")
        if role not in ROLES:
            raise RequestError(f"{where}.role must be one of {', '.join(ROLES)}, got {role!r}", f"{where}.role")
        parsed.append({"role": role, "content": _content_text(message.get("content"), where)})

    for name in UNSUPPORTED:
        if body.get(name) not in (None, False, [], {}):
            raise RequestError(f"{name} is not supported by this reference server", name)
    stop = body.get("stop")
    if stop not in (None, [], ""):
        raise RequestError("stop is not supported by this reference server", "stop")
    n = body.get("n")
    if n not in (None, 1):
        raise RequestError(f"n must be 1, got {n!r}", "n")

    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    name = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise RequestError(f"{name} must be an integer >= 1, got {max_tokens!r}", name)

    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise RequestError(f"seed must be an integer, got {seed!r}", "seed")

    stream = _flag(body, "stream")
    options = body.get("stream_options")
    include_usage = False
    if options is not None:
        if not isinstance(options, dict):
            raise RequestError("stream_options must be an object", "stream_options")
        if not stream:
            raise RequestError("stream_options is only allowed when stream is true", "stream_options")
        include_usage = _flag(options, "include_usage")

    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError(f"model must be a string, got {model!r}", "model")

    return ChatRequest(
        messages=parsed,
        model=model,
        max_tokens=max_tokens,
        temperature=_number(body, "temperature", None, 0.0, 2.0),
        top_p=_number(body, "top_p", 1.0, 1e-9, 1.0),
        seed=seed,
        stream=stream,
        include_usage=include_usage,
        ignore_eos=_flag(body, "ignore_eos"),
    )


def resolve_max_tokens(request: ChatRequest, prompt_tokens: int, max_model_len: int) -> int:
    """The number of new tokens to generate, or RequestError when the context cannot hold them."""
    room = max_model_len - prompt_tokens
    if room < 1:
        raise RequestError(f"prompt is {prompt_tokens} tokens; the model's context is {max_model_len}",
                           "messages")
    if request.max_tokens is None:
        return room
    if request.max_tokens > room:
        raise RequestError(f"max_tokens {request.max_tokens} + prompt {prompt_tokens} tokens exceeds "
                           f"the model's context of {max_model_len}", "max_tokens")
    return request.max_tokens


# --- response bodies ---------------------------------------------------------------------

def _chunk(completion_id: str, created: int, model: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": choices}


def role_chunk(completion_id: str, created: int, model: str) -> dict[str, Any]:
    return _chunk(completion_id, created, model,
                  [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                    "finish_reason": None}])


def content_chunk(completion_id: str, created: int, model: str, text: str) -> dict[str, Any]:
    return _chunk(completion_id, created, model,
                  [{"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}])


def finish_chunk(completion_id: str, created: int, model: str, finish_reason: str) -> dict[str, Any]:
    return _chunk(completion_id, created, model,
                  [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish_reason}])


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def usage_chunk(completion_id: str, created: int, model: str, prompt_tokens: int,
                completion_tokens: int) -> dict[str, Any]:
    body = _chunk(completion_id, created, model, [])
    body["usage"] = usage(prompt_tokens, completion_tokens)
    return body


def completion_body(completion_id: str, created: int, model: str, text: str, finish_reason: str,
                    prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {"id": completion_id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                         "finish_reason": finish_reason}],
            "usage": usage(prompt_tokens, completion_tokens)}


def sse_event(payload: dict[str, Any]) -> bytes:
    """One server-sent event carrying a JSON payload."""
    return b"data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"


class ContentEvents:
    """SSE events for the content chunks of one completion, byte for byte what
    sse_event(content_chunk(...)) gives, with the fixed part encoded once (the streaming hot path)."""

    _MARK = "\u0000"

    def __init__(self, completion_id: str, created: int, model: str):
        frame = json.dumps(content_chunk(completion_id, created, model, self._MARK), ensure_ascii=False,
                           separators=(",", ":"))
        head, tail = frame.rsplit(json.dumps(self._MARK), 1)
        self._head = b"data: " + head.encode("utf-8")
        self._tail = tail.encode("utf-8") + b"\n\n"

    def encode(self, text: str) -> bytes:
        return self._head + json.dumps(text, ensure_ascii=False).encode("utf-8") + self._tail


def finish_reason_for(token_ids: Sequence[int], eos_token_ids: frozenset[int], ignore_eos: bool) -> str:
    """"stop" when the last token is an end-of-sequence token that was honoured, else "length"."""
    if not ignore_eos and token_ids and token_ids[-1] in eos_token_ids:
        return "stop"
    return "length"


# --- incremental detokenization ---------------------------------------------------------

class IncrementalDetokenizer:
    """Turns a growing list of token ids into text deltas.

    It decodes a short window of the ids (from `prefix_offset`) twice: with and without the
    newest ids. The new suffix is emitted once the window's text no longer ends in U+FFFD,
    the mark a byte-level decoder leaves for an incomplete UTF-8 sequence; until then the
    ids are held back. Ids that decode to nothing (special tokens skipped) emit nothing but
    still count. `flush` emits whatever is held at the end of the stream.
    """

    def __init__(self, decode: Callable[[list[int]], str]):
        self._decode = decode
        self.ids: list[int] = []
        self._prefix_offset = 0
        self._read_offset = 0
        self.text = ""

    def add(self, new_ids: Sequence[int]) -> str:
        self.ids.extend(new_ids)
        prefix_text = self._decode(self.ids[self._prefix_offset:self._read_offset])
        window_text = self._decode(self.ids[self._prefix_offset:])
        if len(window_text) <= len(prefix_text) or window_text.endswith("\ufffd"):
            return ""
        delta = window_text[len(prefix_text):]
        self._prefix_offset = self._read_offset
        self._read_offset = len(self.ids)
        self.text += delta
        return delta

    def flush(self) -> str:
        prefix_text = self._decode(self.ids[self._prefix_offset:self._read_offset])
        window_text = self._decode(self.ids[self._prefix_offset:])
        delta = window_text[len(prefix_text):]
        self._prefix_offset = self._read_offset = len(self.ids)
        self.text += delta
        return delta


# --- logging -------------------------------------------------------------------------------

def request_log_line(request_id: str, status: str, prompt_tokens: int, output_tokens: int,
                     ttft_s: float | None, duration_s: float, finish_reason: str | None,
                     error: str | None = None) -> str:
    """One line per request: key=value fields, times in seconds."""
    fields = [
        "request",
        f"id={request_id}",
        f"status={status}",
        f"prompt_tokens={prompt_tokens}",
        f"output_tokens={output_tokens}",
        f"ttft_s={'-' if ttft_s is None else f'{ttft_s:.4f}'}",
        f"duration_s={duration_s:.4f}",
        f"finish={finish_reason or '-'}",
    ]
    if error:
        fields.append("error=" + json.dumps(error))
    return " ".join(fields)
