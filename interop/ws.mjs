#!/usr/bin/env node
// ws.mjs is a WebSocket client written the way most are: the `ws` package,
// and JSON.parse(event.data) on every message. It creates a session,
// attaches, sends a prompt and reads until the run's RUN_FINISHED:
//
//   node ws.mjs --url http://127.0.0.1:PORT [--batch]
//
// With --batch its hello asks for batches and it splits each message on
// newlines instead. It prints one JSON line: how many messages came, how
// many objects they held, how many held more than one, and the frames'
// seqs. A message that JSON.parse refuses fails it (exit 1).

import { parseArgs } from "node:util";
import WebSocket from "ws";

const { values } = parseArgs({ options: { url: { type: "string" }, batch: { type: "boolean", default: false } } });
const ws = new WebSocket(values.url.replace(/^http/, "ws") + "/ws");
const fail = (why) => {
  console.error(why);
  process.exit(1);
};
setTimeout(() => fail("no RUN_FINISHED within 60s"), 60_000).unref();

let messages = 0, objects = 0, multi = 0;
const seqs = [];
const waiting = new Map();
const request = (t, fields) =>
  new Promise((resolve, reject) => {
    const id = `${t}-${waiting.size + messages}`;
    waiting.set(id, { resolve, reject });
    ws.send(JSON.stringify({ t, id, ...fields }));
  });

ws.on("message", (data) => {
  messages++;
  const parts = values.batch ? data.toString().split("\n") : [data.toString()];
  if (parts.length > 1) multi++;
  for (const text of parts) {
    let obj;
    try {
      obj = JSON.parse(text);
    } catch (err) {
      fail(`message ${messages} is not one JSON object (${err.message}): ${text.slice(0, 200)}`);
    }
    objects++;
    if (obj.t === "reply") {
      const w = waiting.get(obj.reqId);
      waiting.delete(obj.reqId);
      if (!w) fail(`a reply to ${obj.reqId}, which nobody asked`);
      obj.ok ? w.resolve(obj.value) : w.reject(new Error(obj.error));
      continue;
    }
    seqs.push(obj.metadata?.orrery?.seq);
    if (obj.type === "RUN_FINISHED") {
      console.log(JSON.stringify({ messages, objects, multi, seqs }));
      process.exit(0);
    }
    if (obj.type === "RUN_ERROR") fail(`the run failed: ${obj.message}`);
  }
});
ws.on("error", (err) => fail(`websocket: ${err.message}`));
ws.on("open", async () => {
  try {
    await request("hello", { client: "ws-test", batch: values.batch });
    const { session } = await request("session.new", {});
    await request("session.attach", { session, since: 0 });
    await request("run.send", { session, input: { text: "go" } });
  } catch (err) {
    fail(`request failed: ${err.message}`);
  }
});
