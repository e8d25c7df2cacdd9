"""A minimal chat-completions server on asyncio for throughput benchmarks: HTTP/1.1 keep-alive,
every request answered after ``--latency`` seconds with one fixed valid completion, the
request body read but not parsed (its CPU cost must not be what a benchmark measures). A
request whose body names ``"tools"`` and holds no tool answer yet is answered with one fixed
tool call instead (``daily`` of AAPL, 5 sessions): an agent's first turn.

Run: python benchmarks/async_chat_server.py --latency 0.1   (prints its base URL, serves
until killed; SIGTERM prints the requests served and the CPU seconds used).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time

ANSWER = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "refusal": None,
        "content": json.dumps({"p_up": 0.6, "lower": -0.01, "upper": 0.012, "rationale": None})}}],
    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}).encode()
TOOL_TURN = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [{
            "id": "call_0", "type": "function", "function": {
                "name": "daily", "arguments": json.dumps({"ticker": "AAPL", "sessions": 5})}}]}}],
    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}).encode()


def reply(answer: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(answer)).encode() + b"\r\n\r\n" + answer)


REPLY, TOOL_REPLY = reply(ANSWER), reply(TOOL_TURN)


class Server:
    def __init__(self, latency: float) -> None:
        self.latency, self.served = latency, 0

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                body = await reader.readexactly(length)
                await asyncio.sleep(self.latency)
                agent = b'"tools"' in body and b'"tool_call_id"' not in body
                writer.write(TOOL_REPLY if agent else REPLY)
                self.served += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def main(latency: float) -> None:
    server = Server(latency)
    listener = await asyncio.start_server(server.connection, "127.0.0.1", 0, backlog=1024)
    port = listener.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}/v1", flush=True)
    done = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, done.set)
    await done.wait()
    print(f"served {server.served} cpu {time.process_time():.3f}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.1)
    asyncio.run(main(parser.parse_args().latency))
    sys.exit(0)
