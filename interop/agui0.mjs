#!/usr/bin/env node
// agui0.mjs drives POST /run with @ag-ui/client 0.0.59 (installed as
// @ag-ui/client-0059), the version CopilotKit 1.x pins, whose RunAgentInput
// has no protocolVersion:
//
//   node agui0.mjs --url http://127.0.0.1:PORT
//
// Run 1: the model calls the client's tool `confirm`; the run must end
// (RUN_FINISHED) with no error from the client, and the pending call in
// metadata.orrery.pendingToolCallIds. Run 2: the client sends the tool's
// answer and the model replies. Any console.warn/error or rejection fails.
// It prints one JSON line of what it saw.

import { parseArgs } from "node:util";
import { HttpAgent } from "@ag-ui/client-0059";

const { values } = parseArgs({ options: { url: { type: "string" } } });
for (const level of ["warn", "error"]) {
  const orig = console[level];
  console[level] = (...args) => {
    orig(...args);
    process.exitCode = 1;
  };
}
const agent = new HttpAgent({ url: values.url + "/run", threadId: "thread-agui0" });
agent.messages = [{ id: "u1", role: "user", content: "ask me" }];
const tools = [{ name: "confirm", description: "Ask the person to confirm", parameters: { type: "object", properties: { question: { type: "string" } } } }];

const runs = [];
async function run() {
  const seen = { types: [], finished: null, calls: [] };
  await agent.runAgent({ tools }, {
    onEvent: ({ event }) => {
      seen.types.push(event.type);
      if (event.type === "RUN_FINISHED") seen.finished = event;
      if (event.type === "TOOL_CALL_START") seen.calls.push({ id: event.toolCallId, name: event.toolCallName });
    },
  });
  runs.push(seen);
  return seen;
}

try {
  const first = await run();
  const call = first.calls.find((c) => c.name === "confirm");
  if (!call) throw new Error(`no confirm call in ${first.types.join(" ")}`);
  agent.messages.push({ id: "t1", role: "tool", toolCallId: call.id, content: "yes" });
  await run();
  const last = agent.messages.filter((m) => m.role === "assistant").at(-1);
  console.log(JSON.stringify({
    pending: runs[0].finished?.metadata?.orrery?.pendingToolCallIds ?? null,
    outcome: runs[0].finished?.outcome ?? null,
    callId: call.id,
    answer: last?.content ?? null,
    types: runs.map((r) => r.types),
  }));
} catch (err) {
  console.error(`agui0: ${err?.stack ?? err}`);
  process.exit(1);
}
