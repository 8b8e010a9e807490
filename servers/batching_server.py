"""The batching reference server: transformers' own continuous batching, tokens streamed.

One ContinuousBatchingManager (model.init_continuous_batching) runs its generation loop in
a background thread. Each HTTP request becomes a streaming manager request; the manager
delivers each step's outputs to the event loop through a result handler
(register_result_handler) or, on transformers versions without it, through one dispatcher
thread reading the manager's output queue. The manager runs greedy decoding only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import os
import sys
import threading
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import openai_contract as oc  # noqa: E402
import serving  # noqa: E402

SWITCH = {"auto": None, "on": True, "off": False}

# Loggers transformers' continuous batching reports a failed warm-up on (as a warning).
WARMUP_LOGGERS = ("ContinuousBatchingLogger", "transformers.generation.continuous_batching")


def warmup_batch_sizes(max_num_seqs: int | None) -> list[int]:
    """Batch sizes of the warm-up generation: powers of two up to max_num_seqs (64 when unset), and it."""
    top = max_num_seqs or 64
    sizes = [1]
    while sizes[-1] * 2 < top:
        sizes.append(sizes[-1] * 2)
    if sizes[-1] != top:
        sizes.append(top)
    return sizes


def _status_name(status: Any) -> str:
    return getattr(status, "name", str(status)).upper()


class BatchingEngine(serving.Engine):
    name = "batching"

    def __init__(self, args):
        super().__init__()
        self.args = args
        self.manager = None
        self._streams: dict[str, serving.TokenStream] = {}
        self._requests: dict[str, tuple[bool, int]] = {}  # request id -> (ignore_eos, tokens already pushed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dispatcher: threading.Thread | None = None
        self._stop_dispatch = threading.Event()
        self._own_waiting = 0

    # --- loading -----------------------------------------------------------------------

    def load(self) -> None:
        import torch
        from transformers import GenerationConfig

        import model_setup

        self.torch = torch
        loaded = model_setup.load(self.args)
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.eos_token_ids = loaded.eos_token_ids
        self.max_model_len = loaded.max_model_len
        self._decode = model_setup.make_decoder(self.tokenizer)
        self._encode = lambda messages: model_setup.encode_chat(self.tokenizer, messages)

        eos = sorted(self.eos_token_ids)
        pad = self.tokenizer.convert_tokens_to_ids("<|endoftext|>")
        generation_config = GenerationConfig(do_sample=False, max_new_tokens=self.args.default_max_tokens,
                                             eos_token_id=eos or None, pad_token_id=pad)
        cb_settings = {
            "block_size": self.args.block_size,
            "num_blocks": self.args.num_blocks,
            "max_batch_tokens": self.args.max_batch_tokens,
            "max_memory_percent": self.args.max_memory_percent,
            "max_requests_per_batch": self.args.max_num_seqs,
            "use_cuda_graph": SWITCH[self.args.cuda_graphs],
            "use_async_batching": SWITCH[self.args.async_batching],
            "scheduler_type": self.args.scheduler,
            "allow_block_sharing": SWITCH[self.args.prefix_sharing],
            "seed": self.args.seed,
        }
        cb_settings = {k: v for k, v in cb_settings.items() if v is not None}
        init = self.model.init_continuous_batching
        init_params = inspect.signature(init).parameters
        used: dict[str, Any] = {}
        ignored: list[str] = []
        try:
            from transformers.generation.configuration_utils import ContinuousBatchingConfig
        except ImportError:
            ContinuousBatchingConfig = None
        if ContinuousBatchingConfig is not None and "continuous_batching_config" in init_params:
            fields = {f.name for f in dataclasses.fields(ContinuousBatchingConfig)} \
                if dataclasses.is_dataclass(ContinuousBatchingConfig) \
                else set(inspect.signature(ContinuousBatchingConfig).parameters)
            used = {k: v for k, v in cb_settings.items() if k in fields}
            ignored = sorted(set(cb_settings) - set(used))
            self.manager = init(generation_config=generation_config,
                                continuous_batching_config=ContinuousBatchingConfig(**used))
            api = "init_continuous_batching(generation_config, continuous_batching_config=ContinuousBatchingConfig)"
        else:
            # Earlier 5.x: the batching settings are attributes of the generation config.
            for key, value in cb_settings.items():
                setattr(generation_config, key, value)
            kwargs = {k: v for k, v in {"streaming": True, "manual_eviction": False}.items() if k in init_params}
            self.manager = init(generation_config=generation_config, **kwargs)
            used = cb_settings
            api = "init_continuous_batching(generation_config with batching attributes)"

        add_params = inspect.signature(self.manager.add_request).parameters
        self._per_request_streaming = "streaming" in add_params
        self._per_request_eos = "eos_token_id" in add_params
        self._handlers = hasattr(self.manager, "register_result_handler")
        warmup = self.run_manager_warmup() if self.args.cb_warmup else "skipped (--no-cb-warmup)"
        self.manager.start()
        self.info = dict(loaded.info, continuous_batching_api=api, continuous_batching_config=used,
                         continuous_batching_warmup=warmup,
                         continuous_batching_ignored=ignored,
                         delivery="register_result_handler" if self._handlers else "dispatcher thread on get_result",
                         decoding="greedy")

    def run_manager_warmup(self) -> str:
        """Run the manager's CUDA-graph warm-up; raise when it failed.

        transformers logs a failed warm-up ("Failed to warm up: CUDA out of memory ...") as a
        warning on its ContinuousBatchingLogger and carries on cold, so every recorded wave
        would then pay graph capture and allocation on the fly (on the H200 its waves were
        bimodal: TTFT p50 3x apart between repeats). The warning is caught here and startup
        fails, so readiness never reports a cold server as warm.
        """
        if not hasattr(self.manager, "warmup"):
            return "absent (this transformers has no manager.warmup)"
        caught: list[str] = []

        class Catch(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                message = record.getMessage()
                if record.levelno >= logging.WARNING and "warm" in message.lower():
                    caught.append(message)

        handler = Catch()
        watched = [logging.getLogger(name) for name in WARMUP_LOGGERS]
        for logger in watched:
            logger.addHandler(handler)
        try:
            self.manager.warmup()
        finally:
            for logger in watched:
                logger.removeHandler(handler)
        if caught:
            raise RuntimeError(f"the continuous batching warm-up failed: {caught[0].splitlines()[0]} "
                               "(lower --max-batch-tokens or --max-memory-percent, or pass --no-cb-warmup "
                               "to serve without it)")
        return "done"

    async def warm_up(self, loop) -> None:
        self._loop = loop
        if not self._handlers:
            self._dispatcher = threading.Thread(target=self._dispatch, name="batching-dispatch", daemon=True)
            self._dispatcher.start()
        request = oc.parse_chat_request({"messages": [{"role": "user", "content": "Warm up."}],
                                         "temperature": 0, "ignore_eos": True})
        # Batches of each size a rehearsal sends (up to max_num_seqs), each request's prompt
        # of another length: the manager captures a CUDA graph the first time it meets a
        # padded batch shape, so shapes left out here were paid for by the first recorded wave
        # that met them (on the H200 the first repeat at 8 and 32 clients had 1.6x the second's
        # TTFT p50 with only the 4-request warm-up).
        for round_, size in enumerate(warmup_batch_sizes(self.args.max_num_seqs)):
            streams = [serving.TokenStream(loop, f"warm-up-{round_}-{i}") for i in range(size)]
            for i, stream in enumerate(streams):
                words = "warm up " * (8 << (i % 7))  # about 16 to 1,000 prompt tokens
                prompt = self.encode_chat([{"role": "user", "content": words}])
                if len(prompt) + 16 > self.max_model_len:
                    prompt = prompt[: max(1, self.max_model_len - 16)]
                self.submit(stream, prompt, 16, request)
            for stream in streams:
                await asyncio.wait_for(stream.collect(), 120.0)

    # --- requests ----------------------------------------------------------------------

    def check(self, request: oc.ChatRequest) -> None:
        if not request.greedy:
            raise oc.RequestError("this server decodes greedily (transformers continuous batching with "
                                  "do_sample=False); send temperature 0 or leave it out", "temperature")
        if request.ignore_eos and not self._per_request_eos:
            raise oc.RequestError("ignore_eos needs a transformers version whose add_request takes "
                                  "eos_token_id", "ignore_eos")

    def encode_chat(self, messages):
        return self._encode(messages)

    def decode(self, token_ids):
        return self._decode(token_ids)

    def submit(self, stream, prompt_ids, max_tokens, request) -> None:
        rid = stream.request_id
        self._streams[rid] = stream
        self._requests[rid] = (request.ignore_eos, 0)
        kwargs: dict[str, Any] = {"input_ids": prompt_ids, "request_id": rid, "max_new_tokens": max_tokens}
        if self._per_request_streaming:
            kwargs["streaming"] = True
        if self._per_request_eos:
            kwargs["eos_token_id"] = -1 if request.ignore_eos else sorted(self.eos_token_ids)
        if self._handlers:
            self.manager.register_result_handler(rid, self._on_output)
        try:
            self.manager.add_request(**kwargs)
        except Exception as exc:
            self._forget(rid)
            stream.fail(f"add_request failed: {type(exc).__name__}: {exc}")

    def _on_output(self, output) -> None:
        """One manager output for one request (on the event loop)."""
        rid = output.request_id
        stream = self._streams.get(rid)
        if stream is None:
            return
        ignore_eos, pushed = self._requests[rid]
        tokens = [int(t) for t in output.generated_tokens if t >= 0]
        if len(tokens) > pushed:
            stream.push(tokens[pushed:])
            self._requests[rid] = (ignore_eos, len(tokens))
        status = _status_name(output.status)
        if output.error or status == "FAILED":
            stream.fail(output.error or "the batching manager failed the request")
            self._forget(rid)
        elif status == "FINISHED":
            stream.finish(oc.finish_reason_for(tokens, self.eos_token_ids, ignore_eos))
            self._forget(rid)

    def _dispatch(self) -> None:
        """Fallback delivery: route the manager's output queue to the event loop."""
        while not self._stop_dispatch.is_set():
            output = self.manager.get_result(timeout=0.1)
            if output is not None:
                self._loop.call_soon_threadsafe(self._on_output, output)

    def _forget(self, rid: str) -> None:
        self._streams.pop(rid, None)
        self._requests.pop(rid, None)
        router = getattr(self.manager, "output_router", None)
        handlers = getattr(router, "result_handlers", None)
        if isinstance(handlers, dict):
            with router._lock:
                handlers.pop(rid, None)

    def cancel(self, stream) -> None:
        stream.cancelled.set()
        if stream.request_id in self._streams:
            self.manager.cancel_request(stream.request_id)
            self._forget(stream.request_id)
            stream.fail("cancelled")

    def queue_depths(self):
        """(running, waiting) read from the manager's scheduler; our own count if it is not there."""
        processor = getattr(self.manager, "batch_processor", None)
        scheduler = getattr(processor, "scheduler", None)
        active = getattr(scheduler, "active_requests", None)
        waiting = getattr(scheduler, "waiting_requests", None)
        if active is not None and waiting is not None:
            queued = getattr(self.manager, "input_queue", None)
            return len(active), len(waiting) + (queued.qsize() if queued is not None else 0)
        started = sum(1 for _, pushed in self._requests.values() if pushed > 0)
        return started, len(self._requests) - started

    def shutdown(self) -> None:
        if self._loop is not None:
            for rid, stream in list(self._streams.items()):
                stream.cancelled.set()
                self.manager.cancel_request(rid)
                self._loop.call_soon_threadsafe(stream.fail, "server shutting down")
        if self.manager is not None:
            self.manager.stop(block=True, timeout=5.0)
        self._stop_dispatch.set()
        if self._dispatcher is not None:
            self._dispatcher.join(timeout=2.0)


def main() -> int:
    parser = serving.common_arguments("Batching reference server: transformers continuous batching, "
                                      "streamed tokens.")
    group = parser.add_argument_group("continuous batching (passed to ContinuousBatchingConfig where it has the field)")
    group.add_argument("--max-batch-tokens", type=int, default=None,
                       help="tokens per forward pass (default: transformers sizes it)")
    group.add_argument("--max-num-seqs", type=int, default=None,
                       help="requests per batch (max_requests_per_batch; default: transformers sizes it)")
    group.add_argument("--num-blocks", type=int, default=None, help="KV cache blocks (default: from free memory)")
    group.add_argument("--block-size", type=int, default=None, help="tokens per KV cache block")
    group.add_argument("--max-memory-percent", type=float, default=0.5,
                       help="share of free GPU memory for the KV cache, 0..1 (default 0.5: at transformers' "
                            "own 0.8 the H200's cache left 18 GiB and the warm-up's 42.8 GiB CUDA-graph "
                            "capture ran out of memory; see rehearsals/h200-heldout-run/RUN.md)")
    group.add_argument("--cuda-graphs", choices=tuple(SWITCH), default="on",
                       help="CUDA graphs for the forward pass (auto: the transformers default, which is off "
                            "for sdpa; on the H200 'on' gave 46 tok/s at 1 client and 1800 at 64 "
                            "against 12 and 663 -- see README.md)")
    group.add_argument("--async-batching", choices=tuple(SWITCH), default="auto",
                       help="double-buffered batching (on: start-up did not finish within 60 s on the H200)")
    group.add_argument("--scheduler", default=None, help="transformers scheduler name (fifo, prefill_first)")
    group.add_argument("--prefix-sharing", choices=tuple(SWITCH), default="auto",
                       help="share KV blocks between identical prompt prefixes (auto: the transformers default)")
    group.add_argument("--no-cb-warmup", dest="cb_warmup", action="store_false",
                       help="skip the manager's CUDA-graph warm-up at startup")
    group.add_argument("--default-max-tokens", type=int, default=128,
                       help="generation config max_new_tokens (requests always pass their own)")
    return serving.run(BatchingEngine, parser)


if __name__ == "__main__":
    sys.exit(main())
