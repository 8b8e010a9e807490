"""A peer load client in the design of `vllm bench serve`: asyncio + aiohttp, one task per request.

It sends one closed-loop wave of N simultaneous streaming chat requests (the same body rehearse
sends), reads each Server-Sent Events stream to [DONE], and prints one JSON line: requests, ok,
content chunks, the process's CPU time over the wave, CPU per chunk, and TTFT p50/p95 as this
client saw them; against `rehearse sim --stamp-sends`, also the latency it added to the stamped
events (its receive time minus the chunk's rehearse_sent_ns, the same wall clock) as p50/p99/max. bench/peer/README.md runs it beside `rehearse bench` against one `rehearse sim`.

usage: python3 bench/peer/asyncio_peer.py --base-url URL --clients 256 --max-tokens 128 [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import aiohttp


async def one(session: aiohttp.ClientSession, url: str, body: dict, added: list[int]) -> tuple[bool, int, float | None]:
    start = time.perf_counter()
    first = None
    chunks = 0
    done = False
    async with session.post(url, json=body) as resp:
        if resp.status != 200:
            return False, 0, None
        async for raw in resp.content:
            now_ns = time.time_ns()
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            ev = json.loads(data)
            if "rehearse_sent_ns" in ev:  # rehearse sim --stamp-sends: receive − send, same wall clock
                added.append(now_ns - ev["rehearse_sent_ns"])
            for ch in ev.get("choices") or []:
                if (ch.get("delta") or {}).get("content"):
                    chunks += 1
                    if first is None:
                        first = time.perf_counter() - start
    return done, chunks, first


def pct(xs: list[float], p: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * p
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


async def wave(url: str, model: str, clients: int, max_tokens: int) -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": "Tell me about the sea."}],
            "max_tokens": max_tokens, "temperature": 0, "stream": True}
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=600)) as session:
        added: list[int] = []
        cpu0, t0 = time.process_time(), time.perf_counter()
        results = await asyncio.gather(*(one(session, url, body, added) for _ in range(clients)), return_exceptions=True)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    # A request that raised (reset, refused) is a failed one, not the end of the wave.
    results = [(False, 0, None) if isinstance(r, BaseException) else r for r in results]
    chunks = sum(c for _, c, _ in results)
    ttft = [f for ok, _, f in results if ok and f is not None]
    return {"requests": clients, "ok": sum(1 for ok, _, _ in results if ok), "chunks": chunks,
            "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "cpu_us_per_chunk": round(cpu / chunks * 1e6, 2) if chunks else None,
            "ttft_p50_s": pct(ttft, 0.5), "ttft_p95_s": pct(ttft, 0.95),
            **added_figures(added)}


def added_figures(added: list[int]) -> dict:
    """The client-added latency of the stamped events, when the server stamped any."""
    if not added:
        return {}
    s = [a / 1e9 for a in added]
    return {"stamped": len(s), "added_p50_s": pct(s, 0.5), "added_p99_s": pct(s, 0.99), "added_max_s": max(s)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", default="Qwen/Qwen2.5-1.5B-Instruct")
    ap.add_argument("--clients", type=int, default=256)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    url = a.base_url.rstrip("/") + "/v1/chat/completions"
    for r in range(a.repeats):
        out = asyncio.run(wave(url, a.model, a.clients, a.max_tokens))
        out["repeat"] = r + 1
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
