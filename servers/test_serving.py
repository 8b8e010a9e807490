"""Tests of the shared HTTP layer over loopback, with a scripted engine (no torch).

They need aiohttp and prometheus-client (on the GPU machine; here: Debian's python3-aiohttp
and python3-prometheus-client with /usr/bin/python3). Without them the module is skipped.
"""

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

try:
    from aiohttp.test_utils import TestClient, TestServer

    import serving
except ImportError as exc:  # pragma: no cover - depends on the interpreter
    raise unittest.SkipTest(f"aiohttp or prometheus-client missing: {exc}")

import openai_contract as oc

EOS = 256  # decodes to nothing, like <|im_end|>
SPECIAL = 300  # decodes to nothing, like a skipped special token


class ScriptedEngine(serving.Engine):
    """Bytes are token ids. The reply is fixed; a worker thread pushes one id per step."""

    name = "scripted"

    def __init__(self, reply: bytes, step_s: float = 0.0, fail_after: int | None = None):
        super().__init__()
        self.reply = list(reply)
        self.step_s = step_s
        self.fail_after = fail_after
        self.max_model_len = 256
        self.eos_token_ids = frozenset({EOS})
        self.info = {"model": "scripted", "random_weights": True, "dtype": "float16"}
        self.running = 0
        self.cancelled: list[str] = []
        self.submitted: list[tuple[list[int], int, bool]] = []

    def encode_chat(self, messages):
        return list("".join(m["content"] for m in messages).encode())

    def decode(self, token_ids):
        return bytes(i for i in token_ids if i < 256).decode("utf-8", errors="replace")

    def check(self, request):
        if request.temperature == 1.5:
            raise oc.RequestError("scripted engine refuses temperature 1.5", "temperature")

    def submit(self, stream, prompt_ids, max_tokens, request):
        self.submitted.append((prompt_ids, max_tokens, request.ignore_eos))
        threading.Thread(target=self._generate, args=(stream, max_tokens, request.ignore_eos), daemon=True).start()

    def _generate(self, stream, max_tokens, ignore_eos):
        self.running += 1
        try:
            script = self.reply + ([] if ignore_eos else [EOS])
            produced = []
            while len(produced) < max_tokens:
                token = script[len(produced) % len(script)]
                if self.step_s:
                    time.sleep(self.step_s)
                if stream.cancelled.is_set():
                    stream.fail_threadsafe("cancelled")
                    return
                if self.fail_after is not None and len(produced) == self.fail_after:
                    stream.fail_threadsafe("device lost")
                    return
                produced.append(token)
                stream.push_threadsafe([token])
                if token == EOS and not ignore_eos:
                    stream.finish_threadsafe("stop")
                    return
            stream.finish_threadsafe("length")
        finally:
            self.running -= 1

    def cancel(self, stream):
        self.cancelled.append(stream.request_id)
        stream.cancelled.set()

    def queue_depths(self):
        return self.running, 0


def parse_sse(raw: bytes):
    """Events of an SSE body, as decoded JSON or the literal '[DONE]'."""
    events = []
    for block in raw.split(b"\n\n"):
        if not block:
            continue
        assert block.startswith(b"data: "), block
        payload = block[len(b"data: "):]
        events.append("[DONE]" if payload == b"[DONE]" else json.loads(payload))
    return events


class ServingTest(unittest.IsolatedAsyncioTestCase):
    def setUp(self):
        poll, serving.DISCONNECT_POLL_S = serving.DISCONNECT_POLL_S, 0.05
        self.addCleanup(setattr, serving, "DISCONNECT_POLL_S", poll)

    async def start(self, engine, ready=True):
        app = serving.build_app(engine, "test-model")
        if ready:
            app["state"].mark_ready()
        self.client = TestClient(TestServer(app))
        await self.client.start_server()
        self.addAsyncCleanup(self.client.close)
        return app["state"]

    async def post(self, **body):
        body.setdefault("messages", [{"role": "user", "content": "hi"}])
        return await self.client.post("/v1/chat/completions", json=body)

    async def test_streamed_request_follows_the_contract(self):
        engine = ScriptedEngine("héllo ✓".encode(), step_s=0.01)
        await self.start(engine)
        resp = await self.post(model="test-model", max_tokens=20, temperature=0, stream=True,
                               stream_options={"include_usage": True})
        self.assertEqual(resp.status, 200)
        self.assertTrue(resp.headers["Content-Type"].startswith("text/event-stream"))
        events = parse_sse(await resp.read())
        self.assertEqual(events[0]["choices"][0]["delta"], {"role": "assistant", "content": ""})
        self.assertEqual(events[-1], "[DONE]")
        usage = events[-2]
        self.assertEqual(usage["choices"], [])
        reply_tokens = len("héllo ✓".encode()) + 1  # the EOS counts as generated
        self.assertEqual(usage["usage"], {"prompt_tokens": 2, "completion_tokens": reply_tokens,
                                          "total_tokens": 2 + reply_tokens})
        self.assertEqual(events[-3]["choices"][0]["finish_reason"], "stop")
        contents = [e["choices"][0]["delta"]["content"] for e in events[1:-3]]
        self.assertTrue(all(contents), "content chunks are never empty")
        self.assertEqual("".join(contents), "héllo ✓")
        self.assertFalse(any("\ufffd" in c for c in contents), "no chunk splits a character")
        self.assertLessEqual(len(contents), len("héllo ✓"))
        self.assertEqual(len({e["id"] for e in events[:-1]}), 1)
        self.assertEqual(engine.submitted, [([ord("h"), ord("i")], 20, False)])

    async def test_tokens_that_arrive_together_share_a_chunk(self):
        engine = ScriptedEngine(b"x")
        await self.start(engine)
        state = self.client.server.app["state"]
        stream = serving.TokenStream(asyncio.get_running_loop(), "direct")
        stream.push([1, 2])
        stream.push([3])
        self.assertEqual(await stream.next_tokens(), [1, 2, 3])
        stream.push([4])
        stream.finish("length")
        self.assertEqual(await stream.next_tokens(), [4])
        self.assertIsNone(await stream.next_tokens())
        self.assertEqual(state.in_flight, 0)

        failing = serving.TokenStream(asyncio.get_running_loop(), "failing")
        failing.push([5])
        failing.fail("boom")
        failing.push([6])  # ignored once closed
        self.assertEqual(await failing.next_tokens(), [5])
        with self.assertRaises(serving.EngineFailure):
            await failing.next_tokens()

    async def test_ignore_eos_and_max_tokens_are_exact(self):
        engine = ScriptedEngine(b"ab")
        await self.start(engine)
        resp = await self.post(max_tokens=7, stream=True, ignore_eos=True, stream_options={"include_usage": True})
        events = parse_sse(await resp.read())
        self.assertEqual(events[-2]["usage"]["completion_tokens"], 7)
        self.assertEqual(events[-3]["choices"][0]["finish_reason"], "length")
        text = "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-2])
        self.assertEqual(text, "abababa")

    async def test_usage_chunk_only_when_asked(self):
        await self.start(ScriptedEngine(b"x"))
        events = parse_sse(await (await self.post(max_tokens=4, stream=True)).read())
        self.assertFalse(any(isinstance(e, dict) and "usage" in e for e in events))
        self.assertEqual(events[-2]["choices"][0]["finish_reason"], "stop")

    async def test_tokens_that_decode_to_nothing_still_count(self):
        engine = ScriptedEngine(bytes([ord("a")]))
        engine.reply = [SPECIAL, ord("a"), SPECIAL]
        await self.start(engine)
        resp = await self.post(max_tokens=3, ignore_eos=True, stream=True, stream_options={"include_usage": True})
        events = parse_sse(await resp.read())
        self.assertEqual(events[-2]["usage"]["completion_tokens"], 3)
        contents = [e["choices"][0]["delta"].get("content") for e in events[1:-3]]
        self.assertEqual(contents, ["a"])

    async def test_non_streaming_response(self):
        await self.start(ScriptedEngine(b"done"))
        resp = await self.post(max_tokens=10)
        self.assertEqual(resp.status, 200)
        body = await resp.json()
        self.assertEqual(body["object"], "chat.completion")
        self.assertEqual(body["choices"][0]["message"], {"role": "assistant", "content": "done"})
        self.assertEqual(body["choices"][0]["finish_reason"], "stop")
        self.assertEqual(body["usage"]["completion_tokens"], 5)

    async def test_errors_are_json_with_status(self):
        await self.start(ScriptedEngine(b"x"))
        cases = [
            (dict(max_tokens=0), 400, "max_tokens"),
            (dict(model="other"), 404, "model"),
            (dict(temperature=1.5), 400, "temperature"),
            (dict(max_tokens=255), 400, "max_tokens"),
            (dict(messages=[{"role": "user", "content": "x" * 256}]), 400, "messages"),
        ]
        for body, status, param in cases:
            with self.subTest(body=body):
                resp = await self.post(**body)
                self.assertEqual(resp.status, status)
                err = (await resp.json())["error"]
                self.assertEqual((err["code"], err["param"]), (status, param))
                self.assertTrue(err["message"])
        resp = await self.client.post("/v1/chat/completions", data=b"{not json")
        self.assertEqual(resp.status, 400)
        self.assertIn("not valid JSON", (await resp.json())["error"]["message"])

    async def test_engine_failure_mid_stream_is_reported_without_done(self):
        await self.start(ScriptedEngine(b"abcdef", fail_after=3))
        resp = await self.post(max_tokens=10, stream=True)
        events = parse_sse(await resp.read())
        self.assertNotIn("[DONE]", events)
        self.assertEqual(events[-1]["error"]["code"], 500)
        self.assertIn("device lost", events[-1]["error"]["message"])
        self.assertEqual("".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1]), "abc")

    async def test_engine_failure_before_any_output_is_http_500(self):
        await self.start(ScriptedEngine(b"abc", fail_after=0))
        resp = await self.post(max_tokens=10)
        self.assertEqual(resp.status, 500)
        self.assertIn("device lost", (await resp.json())["error"]["message"])

    async def test_client_disconnect_cancels_generation(self):
        engine = ScriptedEngine(b"slow", step_s=0.05)
        state = await self.start(engine)
        resp = await self.post(max_tokens=60, ignore_eos=True, stream=True)
        await resp.content.readline()  # the role chunk
        resp.close()
        deadline = time.monotonic() + 5
        while not engine.cancelled and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        self.assertEqual(len(engine.cancelled), 1)
        while state.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        self.assertEqual(state.in_flight, 0)

    async def test_health_models_and_metrics(self):
        engine = ScriptedEngine(b"xy", step_s=0.05)
        state = await self.start(engine, ready=False)
        self.assertEqual((await self.client.get("/health")).status, 503)
        self.assertEqual((await self.post()).status, 503)
        self.assertNotIn("rehearse_server_info{", await (await self.client.get("/metrics")).text())
        engine.info["dtype"] = "bfloat16"  # what a load() fills in before the server is marked ready
        state.mark_ready()
        self.assertEqual((await self.client.get("/health")).status, 200)

        models = await (await self.client.get("/v1/models")).json()
        card = models["data"][0]
        self.assertEqual((models["object"], card["id"], card["max_model_len"]), ("list", "test-model", 256))
        self.assertTrue(card["rehearse"]["random_weights"])
        self.assertEqual(card["rehearse"]["engine"], "scripted")

        pending = asyncio.ensure_future(self.post(max_tokens=40, ignore_eos=True))
        await asyncio.sleep(0.3)
        during = await (await self.client.get("/metrics")).text()
        self.assertIn('vllm:num_requests_running{model_name="test-model"} 1.0', during)
        self.assertIn('vllm:num_requests_waiting{model_name="test-model"} 0.0', during)
        await (await pending).read()
        after = await (await self.client.get("/metrics")).text()
        self.assertIn('vllm:num_requests_running{model_name="test-model"} 0.0', after)
        self.assertIn('vllm:generation_tokens_total{model_name="test-model"} 40.0', after)
        self.assertIn('vllm:prompt_tokens_total{model_name="test-model"} 2.0', after)
        self.assertIn('vllm:request_success_total{finished_reason="length",model_name="test-model"} 1.0', after)
        self.assertIn('rehearse_server_info{dtype="bfloat16",engine="scripted",model_name="test-model",'
                      'random_weights="true"} 1.0', after)

    async def test_concurrent_streams_do_not_mix(self):
        engine = ScriptedEngine(b"0123456789", step_s=0.002)
        await self.start(engine)

        async def one():
            resp = await self.post(max_tokens=25, ignore_eos=True, stream=True)
            events = parse_sse(await resp.read())
            return "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1]), events[0]["id"]

        results = await asyncio.gather(*(one() for _ in range(8)))
        self.assertEqual({text for text, _ in results}, {"0123456789012345678901234"})
        self.assertEqual(len({rid for _, rid in results}), 8)


class ScriptedLoadEngine(ScriptedEngine):
    """The scripted engine with a slow load, for the process lifecycle test."""

    def __init__(self, args):
        super().__init__(b"tick ", step_s=0.02)

    def load(self):
        time.sleep(0.3)
        self.info["dtype"] = "float32"


LIFECYCLE_MAIN = """
import sys, serving, test_serving
sys.exit(serving.run(test_serving.ScriptedLoadEngine, serving.common_arguments("lifecycle test")))
"""


class Lifecycle(unittest.TestCase):
    """serving.run in a real process: 503 while loading, serving, then SIGTERM with a stream open."""

    def test_sigterm_cancels_in_flight_and_exits_zero(self):
        import http.client

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        here = os.path.dirname(os.path.abspath(__file__))
        proc = subprocess.Popen([sys.executable, "-c", LIFECYCLE_MAIN, "--port", str(port), "--model", "scripted",
                                 "--shutdown-grace-s", "0.5"], cwd=here, stderr=subprocess.PIPE, text=True)
        self.addCleanup(proc.kill)
        deadline = time.monotonic() + 10
        statuses = []
        while time.monotonic() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                conn.request("GET", "/health")
                statuses.append(conn.getresponse().status)
                conn.close()
                if statuses[-1] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        self.assertEqual(statuses[-1], 200)
        self.assertIn(503, statuses, "health answers 503 while the model loads")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/metrics")
        exposition = conn.getresponse().read().decode()
        conn.close()
        self.assertIn('rehearse_server_info{dtype="float32",engine="scripted",model_name="scripted",'
                      'random_weights="true"} 1.0', exposition)

        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/v1/chat/completions", body=json.dumps(
            {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 250, "ignore_eos": True, "stream": True}),
            headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        resp.readline()
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rest = resp.read()
        _, stderr = proc.communicate(timeout=10)
        self.assertEqual(proc.returncode, 0, stderr)
        self.assertLess(time.monotonic() - began, 5.0)
        self.assertNotIn(b"[DONE]", rest, "a cancelled stream does not claim completion")
        self.assertIn("shutting down", stderr)
        self.assertIn("status=cancelled", stderr)
        self.assertIn("scripted: stopped", stderr)


if __name__ == "__main__":
    unittest.main()
