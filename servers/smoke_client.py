"""A standard-library client for smoke-testing a reference server (used by smoke.sh).

  health  --wait-s S      poll /health until 200 (exit 1 on timeout or if --pid dies)
  chat                    one streamed request, every chunk printed with its arrival time
  metrics                 scrape /metrics and print the vllm: and rehearse_ lines
  burst   --clients N     N streamed requests at once, /metrics polled meanwhile
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import threading
import time
from urllib.parse import urlsplit

PROMPT = "Explain in three sentences why continuous batching raises LLM serving throughput."


def connection(base_url: str, timeout_s: float) -> http.client.HTTPConnection:
    parts = urlsplit(base_url)
    return http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout_s)


def get(base_url: str, path: str, timeout_s: float = 5.0) -> tuple[int, str]:
    conn = connection(base_url, timeout_s)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", errors="replace")
    finally:
        conn.close()


def wait_health(base_url: str, wait_s: float, pid: int | None) -> int:
    began = time.monotonic()
    last = "no answer"
    while time.monotonic() - began < wait_s:
        if pid is not None:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                print(f"health: server process {pid} exited before it was ready")
                return 1
        try:
            status, body = get(base_url, "/health", 2.0)
            if status == 200:
                print(f"health: 200 after {time.monotonic() - began:.1f} s")
                return 0
            last = f"{status} {body.strip()}"
        except OSError as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(0.5)
    print(f"health: not ready after {wait_s:g} s (last: {last})")
    return 1


def stream_chat(base_url: str, body: dict, on_event=None, timeout_s: float = 120.0) -> dict:
    """POST a streamed chat request; returns a summary. on_event(t_s, raw_line) sees each event."""
    conn = connection(base_url, timeout_s)
    began = time.monotonic()
    summary = {"status": None, "chunks": 0, "text": "", "first_content_s": None, "finish_reason": None,
               "usage": None, "done": False, "error": None}
    try:
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        summary["status"] = resp.status
        if resp.status != 200:
            summary["error"] = resp.read().decode("utf-8", errors="replace")
            return summary
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.rstrip(b"\r\n")
            if not line:
                continue
            t_s = time.monotonic() - began
            if on_event:
                on_event(t_s, line)
            if not line.startswith(b"data: "):
                continue
            payload = line[len(b"data: "):]
            if payload == b"[DONE]":
                summary["done"] = True
                break
            event = json.loads(payload)
            if "error" in event:
                summary["error"] = event["error"]
                continue
            if event.get("usage"):
                summary["usage"] = event["usage"]
            for choice in event.get("choices", []):
                content = choice.get("delta", {}).get("content")
                if content:
                    summary["chunks"] += 1
                    summary["text"] += content
                    if summary["first_content_s"] is None:
                        summary["first_content_s"] = t_s
                if choice.get("finish_reason"):
                    summary["finish_reason"] = choice["finish_reason"]
    finally:
        conn.close()
    summary["e2e_s"] = time.monotonic() - began
    return summary


def chat_body(model: str | None, max_tokens: int, ignore_eos: bool) -> dict:
    body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": ignore_eos}
    if model:
        body["model"] = model
    return body


def chat(args) -> int:
    def show(t_s: float, line: bytes) -> None:
        print(f"  +{t_s * 1000:8.1f} ms  {line.decode('utf-8', errors='replace')}")

    print(f"chat: POST /v1/chat/completions max_tokens={args.max_tokens} temperature=0 "
          f"ignore_eos={args.ignore_eos} stream=true include_usage=true")
    s = stream_chat(args.base_url, chat_body(args.model, args.max_tokens, args.ignore_eos), show)
    usage = s["usage"] or {}
    ttft = "-" if s["first_content_s"] is None else f"{s['first_content_s'] * 1000:.1f} ms"
    print(f"chat: status={s['status']} content_chunks={s['chunks']} finish_reason={s['finish_reason']} "
          f"usage={json.dumps(usage)} done={s['done']} ttft={ttft} e2e={s.get('e2e_s', 0) * 1000:.1f} ms")
    ok = (s["status"] == 200 and s["done"] and s["error"] is None and s["finish_reason"] is not None
          and usage.get("completion_tokens") == (args.max_tokens if args.ignore_eos else usage.get("completion_tokens")))
    if not ok:
        print(f"chat: FAILED ({s['error']})")
    return 0 if ok else 1


def metrics(args) -> int:
    status, body = get(args.base_url, "/metrics")
    print(f"metrics: GET /metrics -> {status}")
    for line in body.splitlines():
        if line.startswith(("vllm:", "rehearse_")) and "_bucket{" not in line:
            print("  " + line)
    wanted = ("vllm:num_requests_running", "vllm:num_requests_waiting")
    return 0 if status == 200 and all(name in body for name in wanted) else 1


def gauge(body: str, name: str) -> float | None:
    for line in body.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def burst(args) -> int:
    results: list[dict] = [{} for _ in range(args.clients)]
    gate = threading.Event()

    def client(i: int) -> None:
        gate.wait()
        results[i] = stream_chat(args.base_url, chat_body(args.model, args.max_tokens, True))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    running_max = waiting_max = 0.0
    began = time.monotonic()
    gate.set()
    while any(t.is_alive() for t in threads):
        try:
            _, body = get(args.base_url, "/metrics", 2.0)
            running_max = max(running_max, gauge(body, "vllm:num_requests_running") or 0)
            waiting_max = max(waiting_max, gauge(body, "vllm:num_requests_waiting") or 0)
        except OSError:
            pass
        time.sleep(0.1)
    wall_s = time.monotonic() - began
    ok = [r for r in results if r.get("done") and r.get("usage")]
    tokens = sum(r["usage"]["completion_tokens"] for r in ok)
    ttfts = sorted(r["first_content_s"] for r in ok if r["first_content_s"] is not None)
    p50 = ttfts[len(ttfts) // 2] if ttfts else float("nan")
    print(f"burst: clients={args.clients} ok={len(ok)} wall_s={wall_s:.2f} completion_tokens={tokens} "
          f"tok_s={tokens / wall_s:.1f} ttft_p50_s={p50:.3f} ttft_max_s={ttfts[-1] if ttfts else float('nan'):.3f} "
          f"max_running={running_max:g} max_waiting={waiting_max:g}")
    return 0 if len(ok) == args.clients else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("health", "chat", "metrics", "burst"))
    parser.add_argument("--base-url", default="http://127.0.0.1:8000")
    parser.add_argument("--model", default=None)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--ignore-eos", action="store_true")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--wait-s", type=float, default=300.0)
    parser.add_argument("--pid", type=int, default=None)
    args = parser.parse_args()
    if args.command == "health":
        return wait_health(args.base_url, args.wait_s, args.pid)
    return {"chat": chat, "metrics": metrics, "burst": burst}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
