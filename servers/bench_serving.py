"""How many streamed tokens per second the shared HTTP layer can carry, without a model.

A scripted engine produces tokens as fast as asked (one id per step for every open request,
like a batching engine's step); N streaming clients read them over loopback. The figure is
the ceiling the serving layer puts on a real engine: it must sit far above what the GPU
delivers (1800 tok/s measured for the batching server at 64 clients on the H200).

usage: /usr/bin/python3 servers/bench_serving.py [--clients 64] [--tokens 128] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

import aiohttp
from aiohttp import web

import openai_contract as oc
import serving


class StepEngine(serving.Engine):
    """Every step (one event-loop turn) gives each open request its next token."""

    name = "step"

    def __init__(self) -> None:
        super().__init__()
        self.max_model_len = 1 << 20
        self.eos_token_ids = frozenset({256})
        self._open: dict[serving.TokenStream, list[int]] = {}
        self._task: asyncio.Task | None = None

    def encode_chat(self, messages):
        return list("".join(m["content"] for m in messages).encode())

    def decode(self, token_ids):
        return bytes(i for i in token_ids if i < 256).decode("utf-8", errors="replace")

    def submit(self, stream, prompt_ids, max_tokens, request):
        self._open[stream] = [0, max_tokens]
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._steps())

    async def _steps(self):
        text = b"lorem ipsum dolor sit amet "
        while self._open:
            for stream, state in list(self._open.items()):
                stream.push([text[state[0] % len(text)]])
                state[0] += 1
                if state[0] >= state[1]:
                    stream.finish("length")
                    del self._open[stream]
            await asyncio.sleep(0)

    def cancel(self, stream):
        self._open.pop(stream, None)

    def queue_depths(self):
        return len(self._open), 0


async def one_wave(session: aiohttp.ClientSession, url: str, clients: int, tokens: int) -> tuple[float, int]:
    body = {"messages": [{"role": "user", "content": "bench"}], "max_tokens": tokens, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}

    async def client() -> int:
        chunks = 0
        async with session.post(url, json=body) as resp:
            async for line in resp.content:
                if line.startswith(b"data: {") and b'"content":"' in line and b'"content":""' not in line:
                    chunks += 1
        return chunks

    began = time.perf_counter()
    counts = await asyncio.gather(*(client() for _ in range(clients)))
    return time.perf_counter() - began, sum(counts)


async def main_async(args) -> int:
    app = serving.build_app(StepEngine(), "bench")
    app["state"].mark_ready()
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    rates = []
    connector = aiohttp.TCPConnector(limit=args.clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        await one_wave(session, url, args.clients, 8)  # warm-up
        for _ in range(args.repeats):
            wall_s, chunks = await one_wave(session, url, args.clients, args.tokens)
            if chunks != args.clients * args.tokens:
                print(f"expected {args.clients * args.tokens} content chunks, got {chunks}")
                return 1
            rates.append(chunks / wall_s)
    await runner.cleanup()
    print(f"clients={args.clients} tokens={args.tokens} repeats={args.repeats} "
          f"streamed_tok_s median={statistics.median(rates):.0f} min={min(rates):.0f} max={max(rates):.0f} "
          "(server and clients share one process and one core)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    serving.log = lambda message: None  # one log line per request would measure stderr, not the layer
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
