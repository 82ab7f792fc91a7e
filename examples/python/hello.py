#!/usr/bin/env python3
"""A tiny Orrery extension in Python, with no library: it speaks JSON-RPC
2.0 framed with Content-Length headers on stdin and stdout, which shows the
protocol is language-neutral.

At ext/load it shows a text surface in the band; its tool "shout" answers
with its text in capitals and counts the calls in the band.
"""
import json
import sys

inp = sys.stdin.buffer
out = sys.stdout.buffer
next_id = 0


def send(msg):
    body = json.dumps(msg).encode()
    out.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    out.flush()


def read():
    length = None
    while True:
        line = inp.readline()
        if not line:
            return None
        line = line.rstrip(b"\r\n")
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return json.loads(inp.read(length))


def request(method, params):
    """Sends a request without waiting: the host answers in order."""
    global next_id
    next_id += 1
    send({"jsonrpc": "2.0", "id": "py-%d" % next_id, "method": method, "params": params})


def band(text):
    request("ui/show", {"id": "hello", "placement": "band", "title": "Python",
                        "surface": {"kind": {"t": "text", "value": text}}})


calls = 0
while True:
    msg = read()
    if msg is None:
        break
    method = msg.get("method")
    if method == "ext/load":
        band("hello from Python")
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
    elif method == "ext/ping":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
    elif method == "tools/call":
        calls += 1
        text = msg["params"]["arguments"].get("text", "")
        band("shouted %d time%s" % (calls, "" if calls == 1 else "s"))
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"text": text.upper()}})
    elif "id" in msg and method:
        send({"jsonrpc": "2.0", "id": msg["id"],
              "error": {"code": -32601, "message": "unknown method " + method}})
    # Answers to our own requests (ui/show) need nothing.
