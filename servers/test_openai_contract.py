"""Unit tests of the pure contract layer (standard library only: python3 -m unittest)."""

import json
import unittest

import openai_contract as oc


def byte_decode(ids):
    """A byte-level decoder like the Qwen tokenizer's: one byte per id, 256+ are specials."""
    return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


class ParseChatRequest(unittest.TestCase):
    def base(self, **extra):
        body = {"messages": [{"role": "user", "content": "Hi"}]}
        body.update(extra)
        return body

    def test_minimal_request_defaults(self):
        req = oc.parse_chat_request(self.base())
        self.assertEqual(req.messages, [{"role": "user", "content": "Hi"}])
        self.assertIsNone(req.max_tokens)
        self.assertIsNone(req.temperature)
        self.assertTrue(req.greedy)
        self.assertFalse(req.stream)
        self.assertFalse(req.include_usage)
        self.assertFalse(req.ignore_eos)

    def test_full_streaming_request(self):
        req = oc.parse_chat_request(self.base(model="m", max_tokens=128, temperature=0, stream=True,
                                              stream_options={"include_usage": True}, ignore_eos=True, seed=7))
        self.assertEqual((req.model, req.max_tokens, req.temperature, req.seed), ("m", 128, 0.0, 7))
        self.assertTrue(req.greedy and req.stream and req.include_usage and req.ignore_eos)

    def test_max_completion_tokens_wins(self):
        req = oc.parse_chat_request(self.base(max_tokens=5, max_completion_tokens=9))
        self.assertEqual(req.max_tokens, 9)

    def test_text_parts_are_joined(self):
        body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                          {"type": "text", "text": "b"}]}]}
        self.assertEqual(oc.parse_chat_request(body).messages[0]["content"], "ab")

    def test_sampling_request_is_not_greedy(self):
        self.assertFalse(oc.parse_chat_request(self.base(temperature=0.7, top_p=0.9)).greedy)

    def test_bad_inputs_name_the_field(self):
        cases = [
            ([1, 2], None, "JSON object"),
            ({}, "messages", "non-empty list"),
            ({"messages": []}, "messages", "non-empty list"),
            ({"messages": ["hi"]}, "messages[0]", "object"),
            ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", "'robot'"),
            ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content", "int"),
            ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages[0].content",
             "text part"),
            (self.base(max_tokens=0), "max_tokens", "0"),
            (self.base(max_tokens=1.5), "max_tokens", "1.5"),
            (self.base(max_tokens=True), "max_tokens", "True"),
            (self.base(max_completion_tokens=-3), "max_completion_tokens", "-3"),
            (self.base(temperature=-1), "temperature", "-1"),
            (self.base(temperature="hot"), "temperature", "'hot'"),
            (self.base(temperature=float("nan")), "temperature", "nan"),
            (self.base(top_p=0), "top_p", "0"),
            (self.base(stream="yes"), "stream", "'yes'"),
            (self.base(stream_options={"include_usage": True}), "stream_options", "stream is true"),
            (self.base(stream=True, stream_options=[1]), "stream_options", "object"),
            (self.base(stop=["\n"]), "stop", "not supported"),
            (self.base(n=2), "n", "2"),
            (self.base(tools=[{"type": "function"}]), "tools", "not supported"),
            (self.base(seed="1"), "seed", "'1'"),
            (self.base(model=3), "model", "3"),
            (self.base(ignore_eos=1), "ignore_eos", "1"),
        ]
        for body, param, fragment in cases:
            with self.subTest(body=body):
                with self.assertRaises(oc.RequestError) as ctx:
                    oc.parse_chat_request(body)
                self.assertEqual(ctx.exception.param, param)
                self.assertIn(fragment, ctx.exception.message)
                self.assertEqual(ctx.exception.status, 400)
                err = ctx.exception.body()["error"]
                self.assertEqual((err["code"], err["param"], err["type"]), (400, param, "BadRequestError"))

    def test_null_and_empty_optional_fields_are_accepted(self):
        req = oc.parse_chat_request(self.base(stop=None, tools=[], n=1, logprobs=False, seed=None))
        self.assertIsNone(req.seed)


class ResolveMaxTokens(unittest.TestCase):
    def req(self, max_tokens):
        return oc.parse_chat_request({"messages": [{"role": "user", "content": "x"}], "max_tokens": max_tokens})

    def test_explicit_limit(self):
        self.assertEqual(oc.resolve_max_tokens(self.req(128), 40, 2048), 128)
        self.assertEqual(oc.resolve_max_tokens(self.req(8), 2040, 2048), 8)

    def test_default_fills_the_context(self):
        self.assertEqual(oc.resolve_max_tokens(self.req(None), 40, 2048), 2008)

    def test_overflow_is_refused(self):
        with self.assertRaises(oc.RequestError) as ctx:
            oc.resolve_max_tokens(self.req(9), 2040, 2048)
        self.assertEqual(ctx.exception.param, "max_tokens")
        with self.assertRaises(oc.RequestError) as ctx:
            oc.resolve_max_tokens(self.req(None), 2048, 2048)
        self.assertEqual(ctx.exception.param, "messages")


class Chunks(unittest.TestCase):
    def decode_event(self, event):
        self.assertTrue(event.startswith(b"data: ") and event.endswith(b"\n\n"))
        return json.loads(event[len(b"data: "):-2])

    def test_chunk_sequence_matches_the_openai_shape(self):
        role = self.decode_event(oc.sse_event(oc.role_chunk("id1", 10, "m")))
        self.assertEqual(role["object"], "chat.completion.chunk")
        self.assertEqual(role["choices"][0]["delta"], {"role": "assistant", "content": ""})
        content = self.decode_event(oc.sse_event(oc.content_chunk("id1", 10, "m", "héllo\n")))
        self.assertEqual(content["choices"][0]["delta"], {"content": "héllo\n"})
        self.assertIsNone(content["choices"][0]["finish_reason"])
        finish = self.decode_event(oc.sse_event(oc.finish_chunk("id1", 10, "m", "length")))
        self.assertEqual(finish["choices"][0], {"index": 0, "delta": {}, "logprobs": None,
                                                "finish_reason": "length"})
        usage = self.decode_event(oc.sse_event(oc.usage_chunk("id1", 10, "m", 30, 128)))
        self.assertEqual(usage["choices"], [])
        self.assertEqual(usage["usage"], {"prompt_tokens": 30, "completion_tokens": 128, "total_tokens": 158})
        for body in (role, content, finish, usage):
            self.assertEqual((body["id"], body["created"], body["model"]), ("id1", 10, "m"))
        self.assertEqual(oc.SSE_DONE, b"data: [DONE]\n\n")

    def test_content_events_match_the_generic_encoding(self):
        events = oc.ContentEvents("chatcmpl-9", 1796045144, 'Qwen/"quoted" model')
        for text in ("a", "héllo\n", "\u0000", '"', "\\", "区域内", "\ufffd", "</script>", "\u2028"):
            with self.subTest(text=text):
                self.assertEqual(events.encode(text),
                                 oc.sse_event(oc.content_chunk("chatcmpl-9", 1796045144, 'Qwen/"quoted" model', text)))

    def test_sse_event_keeps_one_line(self):
        event = oc.sse_event(oc.content_chunk("i", 1, "m", "a\nb\r\nc"))
        self.assertEqual(event.count(b"\n"), 2)

    def test_completion_body(self):
        body = oc.completion_body("id2", 5, "m", "text", "stop", 3, 4)
        self.assertEqual(body["object"], "chat.completion")
        self.assertEqual(body["choices"][0]["message"], {"role": "assistant", "content": "text"})
        self.assertEqual(body["choices"][0]["finish_reason"], "stop")
        self.assertEqual(body["usage"]["total_tokens"], 7)

    def test_finish_reason(self):
        eos = frozenset({9})
        self.assertEqual(oc.finish_reason_for([1, 9], eos, ignore_eos=False), "stop")
        self.assertEqual(oc.finish_reason_for([1, 9], eos, ignore_eos=True), "length")
        self.assertEqual(oc.finish_reason_for([1, 2], eos, ignore_eos=False), "length")
        self.assertEqual(oc.finish_reason_for([], eos, ignore_eos=False), "length")


class Detokenizer(unittest.TestCase):
    def test_ascii_streams_token_by_token(self):
        detok = oc.IncrementalDetokenizer(byte_decode)
        self.assertEqual([detok.add([b]) for b in b"abc"], ["a", "b", "c"])
        self.assertEqual(detok.flush(), "")
        self.assertEqual(detok.text, "abc")

    def test_multibyte_characters_are_held_until_complete(self):
        detok = oc.IncrementalDetokenizer(byte_decode)
        data = "a€b✓".encode()  # € and ✓ are three bytes each
        deltas = [detok.add([b]) for b in data]
        self.assertEqual(deltas, ["a", "", "", "€", "b", "", "", "✓"])
        self.assertEqual(detok.text, "a€b✓")
        self.assertEqual(len(detok.ids), len(data))

    def test_special_tokens_count_but_emit_nothing(self):
        detok = oc.IncrementalDetokenizer(byte_decode)
        self.assertEqual(detok.add([300]), "")
        self.assertEqual(detok.add([ord("x"), 301]), "x")
        self.assertEqual(detok.add([302]), "")
        self.assertEqual(len(detok.ids), 4)
        self.assertEqual(detok.text, "x")

    def test_incomplete_tail_is_flushed_with_a_replacement_character(self):
        detok = oc.IncrementalDetokenizer(byte_decode)
        self.assertEqual(detok.add([ord("o"), ord("k")]), "ok")
        self.assertEqual(detok.add([0xE2, 0x82]), "")
        self.assertEqual(detok.flush(), "\ufffd")
        self.assertEqual(detok.text, "ok\ufffd")

    def test_invalid_byte_inside_the_text_does_not_stall_the_stream(self):
        detok = oc.IncrementalDetokenizer(byte_decode)
        self.assertEqual(detok.add([0x80]), "")
        self.assertEqual(detok.add([ord("z")]), "\ufffdz")

    def test_deltas_concatenate_to_the_full_decode(self):
        data = "Grüße, 世界! ok".encode() + bytes([0xF0, 0x9F, 0x98, 0x80]) + b" end"
        for step in (1, 2, 3, 5):
            detok = oc.IncrementalDetokenizer(byte_decode)
            pieces = [detok.add(list(data[i:i + step])) for i in range(0, len(data), step)]
            pieces.append(detok.flush())
            self.assertEqual("".join(pieces), data.decode(), f"step {step}")


class LogLine(unittest.TestCase):
    def test_fields(self):
        line = oc.request_log_line("chatcmpl-1", "ok", 30, 128, 0.0123456, 2.5, "length")
        self.assertEqual(line, "request id=chatcmpl-1 status=ok prompt_tokens=30 output_tokens=128 "
                               "ttft_s=0.0123 duration_s=2.5000 finish=length")
        line = oc.request_log_line("x", "engine_error", 3, 0, None, 0.1, None, 'CUDA "oops"')
        self.assertIn('ttft_s=- ', line)
        self.assertIn("finish=-", line)
        self.assertTrue(line.endswith('error="CUDA \\"oops\\""'))
        self.assertNotIn("\n", line)


if __name__ == "__main__":
    unittest.main()
