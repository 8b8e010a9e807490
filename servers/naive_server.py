"""The naive reference server: one global lock around each request's whole generation.

Requests queue on an asyncio.Lock (first come, first served); the holder runs a manual
decode loop with a KV cache in a worker thread and streams every token as it is produced.
This is the seed's serial baseline made explicit: throughput cannot grow with concurrency.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import openai_contract as oc  # noqa: E402
import serving  # noqa: E402


class NaiveEngine(serving.Engine):
    name = "naive"

    def __init__(self, args):
        super().__init__()
        self.args = args
        self.lock = asyncio.Lock()
        self.running = 0
        self.waiting = 0
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="naive-generate")
        self._streams: set[serving.TokenStream] = set()
        self._stopping = False

    def load(self) -> None:
        import torch

        import model_setup

        self.torch = torch
        loaded = model_setup.load(self.args)
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.device = loaded.device
        self.eos_token_ids = loaded.eos_token_ids
        self.max_model_len = loaded.max_model_len
        self.info = dict(loaded.info, lock="one global asyncio.Lock around each generation")
        self._decode = model_setup.make_decoder(self.tokenizer)
        self._encode = lambda messages: model_setup.encode_chat(self.tokenizer, messages)
        self._keep_last = "logits_to_keep" in inspect.signature(self.model.forward).parameters
        from transformers import DynamicCache

        self._cache_class = DynamicCache

    async def warm_up(self, loop) -> None:
        prompt = self.encode_chat([{"role": "user", "content": "Warm up."}])
        stream = serving.TokenStream(loop, "warm-up")
        request = oc.parse_chat_request({"messages": [{"role": "user", "content": "Warm up."}],
                                         "temperature": 0, "ignore_eos": True})
        # As long as a rehearsal request: a 4-token warm-up left the first 64-token request on the
        # H200 three times slower than the next ones (allocator growth along the KV length).
        self.submit(stream, prompt, min(128, self.max_model_len - len(prompt)), request)
        await asyncio.wait_for(stream.collect(), 120.0)

    def encode_chat(self, messages):
        return self._encode(messages)

    def decode(self, token_ids):
        return self._decode(token_ids)

    def queue_depths(self):
        return self.running, self.waiting

    def submit(self, stream, prompt_ids, max_tokens, request) -> None:
        self._streams.add(stream)
        asyncio.get_running_loop().create_task(self._run(stream, prompt_ids, max_tokens, request))

    async def _run(self, stream, prompt_ids, max_tokens, request) -> None:
        loop = asyncio.get_running_loop()
        self.waiting += 1
        try:
            async with self.lock:
                self.waiting -= 1
                if stream.cancelled.is_set() or self._stopping:
                    stream.fail("cancelled before generation started")
                    return
                self.running = 1
                try:
                    await loop.run_in_executor(self._executor, self._generate, stream, prompt_ids, max_tokens,
                                               request)
                finally:
                    self.running = 0
        except Exception as exc:  # a CUDA or model error: fail this request, keep serving
            serving.log(f"naive: generation failed for {stream.request_id}: {type(exc).__name__}: {exc}")
            stream.fail(f"{type(exc).__name__}: {exc}")
        finally:
            self._streams.discard(stream)

    def _generate(self, stream: serving.TokenStream, prompt_ids: list[int], max_tokens: int,
                  request: oc.ChatRequest) -> None:
        """The decode loop, in the worker thread: prefill, then one token per forward pass."""
        torch = self.torch
        generator = None
        if not request.greedy:
            generator = torch.Generator(device=self.device)
            generator.manual_seed(self.args.seed if request.seed is None else request.seed)
        stop_ids = frozenset() if request.ignore_eos else self.eos_token_ids
        extra: dict[str, Any] = {"logits_to_keep": 1} if self._keep_last else {}
        generated: list[int] = []
        with torch.inference_mode():
            cache = self._cache_class()
            input_ids = torch.tensor([prompt_ids], dtype=torch.long, device=self.device)
            while True:
                out = self.model(input_ids=input_ids, past_key_values=cache, use_cache=True, **extra)
                cache = out.past_key_values
                next_id = self._pick(out.logits[:, -1, :], request, generator)
                token = int(next_id.item())
                generated.append(token)
                stream.push_threadsafe([token])
                if token in stop_ids:
                    stream.finish_threadsafe("stop")
                    return
                if len(generated) >= max_tokens:
                    stream.finish_threadsafe("length")
                    return
                if stream.cancelled.is_set() or self._stopping:
                    stream.fail_threadsafe("cancelled")
                    return
                input_ids = next_id.view(1, 1)

    def _pick(self, logits, request: oc.ChatRequest, generator):
        torch = self.torch
        if request.greedy:
            return torch.argmax(logits, dim=-1)
        probs = torch.softmax(logits.float() / request.temperature, dim=-1)
        if request.top_p < 1.0:
            sorted_probs, order = torch.sort(probs, descending=True, dim=-1)
            outside = torch.cumsum(sorted_probs, dim=-1) - sorted_probs > request.top_p
            sorted_probs = sorted_probs.masked_fill(outside, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        return torch.multinomial(probs, 1, generator=generator).view(-1)

    def cancel(self, stream) -> None:
        stream.cancelled.set()

    def shutdown(self) -> None:
        self._stopping = True
        for stream in list(self._streams):
            stream.cancelled.set()
        self._executor.shutdown(wait=True)


def main() -> int:
    parser = serving.common_arguments("Naive reference server: transformers, one global lock, streamed tokens.")
    return serving.run(NaiveEngine, parser)


if __name__ == "__main__":
    sys.exit(main())
