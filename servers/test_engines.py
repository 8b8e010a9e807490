"""Tests of the two engines' serving logic without torch.

The naive engine runs with its decode loop replaced by a scripted one, so the global lock,
the queue gauges and cancellation are the real code. The batching engine runs against a
fake ContinuousBatchingManager with the transformers 5.17 surface the server uses
(register_result_handler, add_request(streaming, eos_token_id), cancel_request, stop,
cumulative generated_tokens, RequestStatus names). Needs aiohttp and prometheus-client.
"""

import argparse
import asyncio
import enum
import json
import queue
import threading
import time
import types
import unittest

try:
    from aiohttp.test_utils import TestClient, TestServer

    import batching_server
    import naive_server
    import serving
except ImportError as exc:  # pragma: no cover - depends on the interpreter
    raise unittest.SkipTest(f"aiohttp or prometheus-client missing: {exc}")

EOS = 256


def byte_decode(ids):
    return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


def byte_encode(messages):
    return list("".join(m["content"] for m in messages).encode())


def sse_events(raw: bytes):
    out = []
    for block in raw.split(b"\n\n"):
        if block:
            payload = block[len(b"data: "):]
            out.append("[DONE]" if payload == b"[DONE]" else json.loads(payload))
    return out


def text_of(events):
    return "".join(e["choices"][0]["delta"].get("content", "") for e in events
                   if isinstance(e, dict) and e.get("choices"))


class Status(enum.IntEnum):  # the names transformers' RequestStatus uses
    PENDING = 0
    PREFILLING = 1
    DECODING = 2
    FINISHED = 3
    FAILED = 4


class FakeManager:
    """A ContinuousBatchingManager stand-in: one generation thread, one token per request per step."""

    def __init__(self, reply: bytes, step_s: float = 0.005, fail_request: str | None = None):
        self.reply = list(reply)
        self.step_s = step_s
        self.fail_request = fail_request
        self.added: list[dict] = []
        self.cancelled: list[str] = []
        self.stopped = False
        self.output_router = types.SimpleNamespace(result_handlers={}, _lock=threading.Lock())
        self.batch_processor = types.SimpleNamespace(
            scheduler=types.SimpleNamespace(active_requests={}, waiting_requests={}))
        self.input_queue = queue.Queue()
        self._live: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def register_result_handler(self, request_id, callback):
        loop = asyncio.get_running_loop()
        with self.output_router._lock:
            self.output_router.result_handlers[request_id] = (callback, loop)

    def add_request(self, input_ids, request_id=None, max_new_tokens=None, streaming=False,
                    record_timestamps=False, eos_token_id=None, **logit_processor_kwargs):
        self.added.append({"request_id": request_id, "max_new_tokens": max_new_tokens, "streaming": streaming,
                           "eos_token_id": eos_token_id, "prompt": list(input_ids)})
        eos = set() if eos_token_id in (None, -1) else set(eos_token_id if isinstance(eos_token_id, list)
                                                             else [eos_token_id])
        with self._lock:
            self._live[request_id] = {"generated": [], "max": max_new_tokens, "eos": eos, "script": list(self.reply)}
            self.batch_processor.scheduler.active_requests[request_id] = True
        return request_id

    def cancel_request(self, request_id):
        self.cancelled.append(request_id)
        with self._lock:
            self._live.pop(request_id, None)
            self.batch_processor.scheduler.active_requests.pop(request_id, None)

    def stop(self, block=True, timeout=None, keep_for_next_session=False, hard_stop=False):
        self.stopped = True

    def _deliver(self, request_id, output):
        with self.output_router._lock:
            entry = self.output_router.result_handlers.get(request_id)
        if entry is not None:
            callback, loop = entry
            loop.call_soon_threadsafe(callback, output)

    def _loop(self):
        while not self.stopped:
            time.sleep(self.step_s)
            with self._lock:
                live = list(self._live.items())
            for rid, req in live:
                if rid == self.fail_request and len(req["generated"]) == 2:
                    out = types.SimpleNamespace(request_id=rid, generated_tokens=list(req["generated"]),
                                                status=Status.FAILED, error="paged cache exhausted")
                    with self._lock:
                        self._live.pop(rid, None)
                        self.batch_processor.scheduler.active_requests.pop(rid, None)
                    self._deliver(rid, out)
                    continue
                token = req["script"][len(req["generated"]) % len(req["script"])]
                req["generated"].append(token)
                done = token in req["eos"] or len(req["generated"]) >= req["max"]
                out = types.SimpleNamespace(request_id=rid, generated_tokens=list(req["generated"]),
                                            status=Status.FINISHED if done else Status.DECODING, error=None)
                if done:
                    with self._lock:
                        self._live.pop(rid, None)
                        self.batch_processor.scheduler.active_requests.pop(rid, None)
                self._deliver(rid, out)


def batching_engine(manager: FakeManager) -> batching_server.BatchingEngine:
    engine = batching_server.BatchingEngine(argparse.Namespace(seed=0))
    engine.manager = manager
    engine._per_request_streaming = True
    engine._per_request_eos = True
    engine._handlers = True
    engine.eos_token_ids = frozenset({EOS})
    engine.max_model_len = 512
    engine._decode = byte_decode
    engine._encode = byte_encode
    engine.info = {"random_weights": True, "dtype": "float16"}
    return engine


class EngineTest(unittest.IsolatedAsyncioTestCase):
    def setUp(self):
        poll, serving.DISCONNECT_POLL_S = serving.DISCONNECT_POLL_S, 0.05
        self.addCleanup(setattr, serving, "DISCONNECT_POLL_S", poll)

    async def serve(self, engine):
        app = serving.build_app(engine, "m")
        app["state"].mark_ready()
        self.state = app["state"]
        self.client = TestClient(TestServer(app))
        await self.client.start_server()
        self.addAsyncCleanup(self.client.close)

    async def chat(self, **body):
        body.setdefault("messages", [{"role": "user", "content": "hi"}])
        body.setdefault("stream", True)
        body.setdefault("stream_options", {"include_usage": True})
        resp = await self.client.post("/v1/chat/completions", json=body)
        return resp.status, (sse_events(await resp.read()) if resp.status == 200 else await resp.json())


class BatchingEngineTest(EngineTest):
    async def asyncSetUp(self):
        self.manager = FakeManager(b"batch")
        self.engine = batching_engine(self.manager)
        self.addCleanup(setattr, self.manager, "stopped", True)
        await self.serve(self.engine)

    async def test_ignore_eos_runs_to_max_tokens(self):
        status, events = await self.chat(max_tokens=12, ignore_eos=True, temperature=0)
        self.assertEqual(status, 200)
        self.assertEqual(text_of(events), "batchbatchba")
        self.assertEqual(events[-2]["usage"]["completion_tokens"], 12)
        self.assertEqual(events[-3]["choices"][0]["finish_reason"], "length")
        added = self.manager.added[-1]
        self.assertEqual((added["max_new_tokens"], added["streaming"], added["eos_token_id"]), (12, True, -1))

    async def test_warm_up_meets_every_batch_size(self):
        self.engine.args.max_num_seqs = 4
        await self.engine.warm_up(asyncio.get_running_loop())
        warm = [a for a in self.manager.added if a["request_id"].startswith("warm-up-")]
        self.assertEqual(len(warm), 1 + 2 + 4)
        self.assertTrue(all(a["max_new_tokens"] == 16 and a["eos_token_id"] == -1 for a in warm))
        last = [len(a["prompt"]) for a in warm if a["request_id"].startswith("warm-up-2-")]
        self.assertEqual(len(set(last)), 4, "each request of a batch has another prompt length")

    async def test_eos_ends_with_stop(self):
        self.manager.reply = list(b"ok") + [EOS]
        status, events = await self.chat(max_tokens=50)
        self.assertEqual(text_of(events), "ok")
        self.assertEqual(events[-3]["choices"][0]["finish_reason"], "stop")
        self.assertEqual(events[-2]["usage"]["completion_tokens"], 3)
        self.assertEqual(self.manager.added[-1]["eos_token_id"], [EOS])

    async def test_concurrent_requests_are_batched_and_counted(self):
        tasks = [asyncio.ensure_future(self.chat(max_tokens=40, ignore_eos=True)) for _ in range(16)]
        await asyncio.sleep(0.1)
        metrics = await (await self.client.get("/metrics")).text()
        self.assertIn('vllm:num_requests_running{model_name="m"} 16.0', metrics)
        results = await asyncio.gather(*tasks)
        self.assertTrue(all(text_of(events) == ("batch" * 8) for _, events in results))
        self.assertEqual(self.engine.queue_depths(), (0, 0))
        self.assertEqual(self.engine._streams, {})
        self.assertEqual(self.manager.output_router.result_handlers, {})

    async def test_sampling_is_refused(self):
        status, body = await self.chat(temperature=0.8)
        self.assertEqual(status, 400)
        self.assertEqual(body["error"]["param"], "temperature")
        self.assertEqual(self.manager.added, [])

    async def test_manager_failure_reaches_the_client(self):
        self.manager.fail_request = "pending"
        original = self.engine.submit

        def submit(stream, prompt_ids, max_tokens, request):
            self.manager.fail_request = stream.request_id
            original(stream, prompt_ids, max_tokens, request)

        self.engine.submit = submit
        status, events = await self.chat(max_tokens=20, ignore_eos=True)
        self.assertEqual(status, 200)
        self.assertEqual(events[-1]["error"]["code"], 500)
        self.assertIn("paged cache exhausted", events[-1]["error"]["message"])
        self.assertNotIn("[DONE]", events)
        self.assertEqual(text_of(events[:-1]), "ba")

    async def test_disconnect_cancels_the_manager_request(self):
        self.manager.step_s = 0.05
        resp = await self.client.post("/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 200, "ignore_eos": True, "stream": True})
        await resp.content.readline()
        resp.close()
        deadline = time.monotonic() + 5
        while not self.manager.cancelled and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        self.assertEqual(self.manager.cancelled, [self.manager.added[-1]["request_id"]])
        while self.state.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        self.assertEqual(self.state.in_flight, 0)

    async def test_shutdown_cancels_in_flight_and_stops_the_manager(self):
        self.manager.step_s = 0.05
        self.engine._loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(self.chat(max_tokens=200, ignore_eos=True))
        await asyncio.sleep(0.2)
        await asyncio.get_running_loop().run_in_executor(None, self.engine.shutdown)
        status, events = await task
        self.assertEqual(status, 200)
        self.assertIn("shutting down", events[-1]["error"]["message"])
        self.assertTrue(self.manager.stopped)
        self.assertEqual(len(self.manager.cancelled), 1)


class NaiveEngineTest(EngineTest):
    async def asyncSetUp(self):
        self.engine = naive_server.NaiveEngine(argparse.Namespace(seed=0))
        self.engine.eos_token_ids = frozenset({EOS})
        self.engine.max_model_len = 512
        self.engine._decode = byte_decode
        self.engine._encode = byte_encode
        self.engine.info = {"random_weights": True, "dtype": "float16"}
        self.generated: list[str] = []
        self.overlap = 0
        self.active = 0

        def scripted_generate(stream, prompt_ids, max_tokens, request):
            """Stands in for the torch decode loop, with its stop and cancel rules."""
            self.active += 1
            self.overlap = max(self.overlap, self.active)
            self.generated.append(stream.request_id)
            try:
                script = list(b"serial") + ([] if request.ignore_eos else [EOS])
                for i in range(max_tokens):
                    time.sleep(0.01)
                    token = script[i % len(script)]
                    stream.push_threadsafe([token])
                    if token in (set() if request.ignore_eos else self.engine.eos_token_ids):
                        stream.finish_threadsafe("stop")
                        return
                    if stream.cancelled.is_set() or self.engine._stopping:
                        stream.fail_threadsafe("cancelled")
                        return
                stream.finish_threadsafe("length")
            finally:
                self.active -= 1

        self.engine._generate = scripted_generate
        await self.serve(self.engine)

    async def test_requests_are_served_one_at_a_time_in_arrival_order(self):
        tasks = []
        for _ in range(4):
            tasks.append(asyncio.ensure_future(self.chat(max_tokens=30, ignore_eos=True)))
            await asyncio.sleep(0.01)
        seen = set()
        while not all(t.done() for t in tasks):
            seen.add(self.engine.queue_depths())
            await asyncio.sleep(0.005)
        self.assertIn((1, 3), seen)
        self.assertTrue(all(running <= 1 for running, _ in seen))
        results = await asyncio.gather(*tasks)
        self.assertEqual(self.overlap, 1)
        self.assertEqual([text_of(events) for _, events in results], ["serialserialserialserialserial"] * 4)
        first_ids = [events[0]["id"] for _, events in results]
        self.assertEqual(self.generated, first_ids, "the lock is first come, first served")
        self.assertEqual(self.engine.queue_depths(), (0, 0))

    async def test_eos_stops_unless_ignored(self):
        _, events = await self.chat(max_tokens=50)
        self.assertEqual((text_of(events), events[-3]["choices"][0]["finish_reason"]), ("serial", "stop"))
        self.assertEqual(events[-2]["usage"]["completion_tokens"], 7)

    async def test_a_request_cancelled_while_waiting_never_generates(self):
        first = asyncio.ensure_future(self.chat(max_tokens=40, ignore_eos=True))  # 0.4 s: several watchdog polls
        await asyncio.sleep(0.05)
        resp = await self.client.post("/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 30, "stream": True})
        role = json.loads((await resp.content.readline())[len(b"data: "):])
        resp.close()
        await first
        deadline = time.monotonic() + 5
        while self.state.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        self.assertEqual(self.state.in_flight, 0)
        self.assertNotIn(role["id"], self.generated)
        self.assertEqual(len(self.generated), 1)


if __name__ == "__main__":
    unittest.main()


class ManagerWarmupTest(unittest.TestCase):
    """A failed manager warm-up fails startup instead of serving cold."""

    def engine_with_warmup(self, warmup):
        engine = batching_server.BatchingEngine(argparse.Namespace(seed=0))
        engine.manager = types.SimpleNamespace(warmup=warmup)
        return engine

    def test_logged_oom_fails_startup(self):
        def warmup():
            # What transformers 5.17 does on the H200: log and carry on.
            batching_server.logging.getLogger("ContinuousBatchingLogger").warning(
                "Failed to warm up: CUDA out of memory. Tried to allocate 42.80 GiB.\nmore")
        engine = self.engine_with_warmup(warmup)
        with self.assertRaisesRegex(RuntimeError, r"warm-up failed: Failed to warm up: CUDA out of memory\. "
                                                  r"Tried to allocate 42\.80 GiB\. \(lower"):
            engine.run_manager_warmup()

    def test_clean_warmup_is_recorded(self):
        calls = []
        engine = self.engine_with_warmup(lambda: calls.append(1))
        self.assertEqual(engine.run_manager_warmup(), "done")
        self.assertEqual(calls, [1])

    def test_unrelated_warning_does_not_fail(self):
        def warmup():
            batching_server.logging.getLogger("ContinuousBatchingLogger").warning("block table resized")
        self.assertEqual(self.engine_with_warmup(warmup).run_manager_warmup(), "done")

    def test_handler_is_removed_after_a_raise(self):
        def warmup():
            raise ValueError("boom")
        with self.assertRaises(ValueError):
            self.engine_with_warmup(warmup).run_manager_warmup()
        self.assertEqual(batching_server.logging.getLogger("ContinuousBatchingLogger").handlers, [])

    def test_manager_without_warmup(self):
        engine = batching_server.BatchingEngine(argparse.Namespace(seed=0))
        engine.manager = types.SimpleNamespace()
        self.assertIn("absent", engine.run_manager_warmup())


class WarmupShapesTest(unittest.TestCase):
    def test_batch_sizes_reach_max_num_seqs(self):
        self.assertEqual(batching_server.warmup_batch_sizes(64), [1, 2, 4, 8, 16, 32, 64])
        self.assertEqual(batching_server.warmup_batch_sizes(48), [1, 2, 4, 8, 16, 32, 48])
        self.assertEqual(batching_server.warmup_batch_sizes(1), [1])
        self.assertEqual(batching_server.warmup_batch_sizes(None), [1, 2, 4, 8, 16, 32, 64])
