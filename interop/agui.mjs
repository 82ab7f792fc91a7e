#!/usr/bin/env node
// agui.mjs drives an Orrery server's POST /run with the official AG-UI 1.0
// client (@ag-ui/client's HttpAgent) and checks what a stock client sees:
//
//   node agui.mjs --url http://127.0.0.1:PORT --scenario text
//
// On success it prints one JSON line of results on stdout and exits 0. On any
// failure it prints what failed on stderr and exits 1. interop_test.go starts
// a fresh kernel per scenario, with a scripted model, and asserts the values.
//
// Every run is checked the same way:
//   - any console.warn or console.error during the run fails it (the client
//     logs "[ag-ui]…" when it strips, drops or translates what a server sent,
//     and logs reducer problems such as a state patch that does not apply);
//   - a verifyEvents AGUIError, a ZodError or any other runAgent rejection
//     fails it;
//   - every event (onEvent) validates against @ag-ui/core's schema for its
//     type, and carries an integer metadata.orrery.seq > 0, strictly
//     increasing within the run's stream;
//   - the run's STATE_SNAPSHOT plus its STATE_DELTAs, applied with
//     fast-json-patch, equal the client's state and the kernel's own state
//     (the seq-0 STATE_SNAPSHOT that GET /events?session= starts with);
//   - the client's messages equal the kernel's MESSAGES_SNAPSHOT;
//   - the whole log (POST /control session.read) validates frame by frame,
//     has seqs 1..head with no gap, holds the run's stream exactly, and each
//     logged run replays cleanly through the official client pipeline.

import { parseArgs, inspect } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { HttpAgent, AGUIError } from "@ag-ui/client";
import { EventSchemas, MessageSchema } from "@ag-ui/core/schemas";
import jsonpatch from "fast-json-patch";

// Nothing may silence the client's transformation and enforcement warnings.
delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;

// The tool the client offers in the client-tool scenario; the Go test's
// script calls it by this name.
const CLIENT_TOOL = {
  name: "confirm",
  description: "Asks the person to confirm an action.",
  parameters: {
    type: "object",
    properties: { question: { type: "string" } },
    required: ["question"],
  },
};
const CLIENT_TOOL_ANSWER = "yes, go ahead";
const OFFLINE_PROMPT = "echo hello";
const RUN_TIMEOUT_MS = 30_000;

const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

// ---------------------------------------------------------------------------
// Failure and console capture

class Failure extends Error {}

function fail(msg) {
  throw new Failure(msg);
}

function describe(err) {
  if (err instanceof AGUIError) return `AGUIError (verifyEvents): ${err.message}`;
  if (err && err.name === "ZodError") return `ZodError: ${err.message}`;
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  return inspect(err);
}

// consoleLog holds every console call made in this process, by the client or
// anyone else. Nothing reaches stdout but the result line.
const consoleLog = [];
for (const level of ["warn", "error", "log", "info", "debug"]) {
  console[level] = (...args) => {
    const text = args
      .map((a) => (typeof a === "string" ? a : a instanceof Error ? a.stack : inspect(a, { depth: 6 })))
      .join(" ");
    consoleLog.push({ level, text });
    process.stderr.write(`[console.${level}] ${text}\n`);
  };
}

// checkConsole fails when a warning or error was logged since mark.
function checkConsole(mark, what) {
  const bad = consoleLog.slice(mark).filter((m) => m.level === "warn" || m.level === "error");
  if (bad.length === 0) return;
  const agui = bad.filter((m) => m.text.includes("[ag-ui]"));
  const head = agui.length > 0 ? `${agui.length} [ag-ui] warning(s)` : `${bad.length} console warning(s)/error(s)`;
  fail(`${what}: the client logged ${head}:\n` + bad.map((m) => `  console.${m.level}: ${m.text}`).join("\n"));
}

// ---------------------------------------------------------------------------
// Schemas, seqs, state

// schemaByType maps every AG-UI 1.0 event type to its zod schema.
const schemaByType = new Map(EventSchemas.options.map((s) => [s.shape.type.value, s]));

function zodIssues(result) {
  return result.error.issues.map((i) => `${i.path.length ? i.path.join(".") : "(root)"}: ${i.message}`).join("; ");
}

// schemaProblem returns why ev does not validate against its type's schema,
// or "" when it does.
function schemaProblem(ev) {
  if (ev === null || typeof ev !== "object" || Array.isArray(ev)) return "the frame is not a JSON object";
  const schema = schemaByType.get(ev.type);
  if (!schema) return `type ${JSON.stringify(ev.type)} is not an AG-UI 1.0 event type`;
  const r = schema.safeParse(ev);
  return r.success ? "" : zodIssues(r);
}

function seqOf(ev) {
  return ev?.metadata?.orrery?.seq;
}

function brief(ev) {
  const s = JSON.stringify(ev);
  return s.length > 400 ? s.slice(0, 400) + "…" : s;
}

// diff returns the JSON Patch that turns got into want; [] means equal.
function diff(got, want) {
  return jsonpatch.compare(got ?? null, want ?? null);
}

function sameJSON(got, want) {
  return diff(got, want).length === 0;
}

// applyState applies a run's STATE_SNAPSHOT and STATE_DELTAs in order, the
// way a careful client does, and returns the document.
function applyState(events, what) {
  let state;
  let seen = false;
  for (const ev of events) {
    if (ev.type === "STATE_SNAPSHOT") {
      state = jsonpatch.deepClone(ev.snapshot);
      seen = true;
    } else if (ev.type === "STATE_DELTA") {
      if (!seen) fail(`${what}: STATE_DELTA seq ${seqOf(ev)} arrives before any STATE_SNAPSHOT`);
      for (const op of ev.delta) {
        if (!["add", "replace", "remove"].includes(op.op)) {
          fail(`${what}: STATE_DELTA seq ${seqOf(ev)} uses op ${JSON.stringify(op.op)}; Orrery's deltas use only add, replace and remove`);
        }
      }
      const copy = jsonpatch.deepClone(state);
      const invalid = jsonpatch.validate(ev.delta, copy);
      if (invalid) {
        fail(`${what}: STATE_DELTA seq ${seqOf(ev)} does not apply: ${invalid.name} ${invalid.message} (op ${JSON.stringify(invalid.operation)})`);
      }
      try {
        state = jsonpatch.applyPatch(copy, ev.delta, true, true).newDocument;
      } catch (err) {
        fail(`${what}: STATE_DELTA seq ${seqOf(ev)} does not apply: ${describe(err)}`);
      }
    }
  }
  if (!seen) fail(`${what}: the run has no STATE_SNAPSHOT`);
  return state;
}

// comparableMessage keeps the fields both sides must agree on; metadata is
// the client's own merge of event metadata and is left out.
function comparableMessage(m) {
  const out = { id: m.id, role: m.role };
  if (m.content !== undefined) out.content = m.content;
  if (m.toolCallId !== undefined) out.toolCallId = m.toolCallId;
  if (m.toolCalls !== undefined && m.toolCalls.length > 0) {
    out.toolCalls = m.toolCalls.map((c) => ({ id: c.id, type: c.type, function: { name: c.function.name, arguments: c.function.arguments } }));
  }
  return out;
}

// ---------------------------------------------------------------------------
// Talking to the server

const args = parseArgs({
  options: {
    url: { type: "string" },
    scenario: { type: "string" },
    // query is added to POST /run's URL, such as stream_mode=agui_spec&a2ui=1.
    query: { type: "string" },
  },
  strict: true,
}).values;
if (!args.url || !args.scenario) {
  process.stderr.write("usage: node agui.mjs --url http://HOST:PORT --scenario NAME\n");
  process.exit(2);
}
const base = args.url.replace(/\/+$/, "").replace(/\/run$/, "");

async function control(body) {
  const res = await fetch(`${base}/control`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    fail(`POST /control ${body.t}: the reply is not JSON (status ${res.status}): ${text}`);
  }
  return { status: res.status, value };
}

// readLog returns every frame of a session's log, exactly as logged.
async function readLog(threadId) {
  const { status, value } = await control({ t: "session.read", id: "read-log", session: threadId, since: 0, limit: 10000 });
  if (status !== 200) fail(`session.read ${threadId}: status ${status}: ${JSON.stringify(value)}`);
  if (!Array.isArray(value.frames) || !Number.isInteger(value.head)) {
    fail(`session.read ${threadId}: want {frames: [...], head: N}, got ${brief(value)}`);
  }
  return value;
}

// readKernelSnapshots opens GET /events?session=ID with no since, parses the
// SSE stream itself (LF framing) and returns its first two frames, the
// kernel's STATE_SNAPSHOT and MESSAGES_SNAPSHOT, then hangs up.
async function readKernelSnapshots(threadId) {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error("no snapshot frames within 10s")), 10_000);
  const frames = [];
  try {
    const res = await fetch(`${base}/events?session=${encodeURIComponent(threadId)}`, {
      headers: { Accept: "text/event-stream" },
      signal: ac.signal,
    });
    if (res.status !== 200) fail(`GET /events?session=${threadId}: status ${res.status}: ${await res.text()}`);
    const ct = res.headers.get("content-type") || "";
    if (!ct.startsWith("text/event-stream")) fail(`GET /events: Content-Type is ${JSON.stringify(ct)}, want text/event-stream`);
    const reader = res.body.getReader();
    const dec = new TextDecoder("utf-8");
    let buf = "";
    while (frames.length < 2) {
      const { done, value } = await reader.read();
      if (done) fail(`GET /events: the stream ended after ${frames.length} frame(s), before the two snapshots`);
      buf += dec.decode(value, { stream: true });
      if (buf.includes("\r")) fail("GET /events: the stream has a CR; SSE framing must be LF only");
      let i;
      while (frames.length < 2 && (i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        let id;
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) continue;
          if (line.startsWith("id:")) id = line.slice(3).trimStart();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (data.length === 0) continue;
        let ev;
        try {
          ev = JSON.parse(data.join("\n"));
        } catch (err) {
          fail(`GET /events: a data payload is not JSON (${err.message}): ${data.join("\n")}`);
        }
        frames.push({ id, ev });
      }
    }
    await reader.cancel().catch(() => {});
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
  const [state, msgs] = frames;
  for (const [f, want] of [
    [state, "STATE_SNAPSHOT"],
    [msgs, "MESSAGES_SNAPSHOT"],
  ]) {
    if (f.ev.type !== want) fail(`GET /events: want ${want} among the first frames, got ${brief(f.ev)}`);
    const p = schemaProblem(f.ev);
    if (p) fail(`GET /events: ${want} does not validate against @ag-ui/core: ${p}`);
    if (seqOf(f.ev) !== 0) fail(`GET /events: ${want} has metadata.orrery.seq ${JSON.stringify(seqOf(f.ev))}, want 0`);
    if (f.id !== undefined) fail(`GET /events: the seq-0 ${want} carries an id: line (${f.id}); it must not`);
  }
  return { state: state.ev.snapshot, messages: msgs.ev.messages };
}

// ---------------------------------------------------------------------------
// One run through HttpAgent

function newAgent(threadId, initialMessages, fetchFn) {
  const cfg = { url: `${base}/run${args.query ? "?" + args.query : ""}`, threadId, initialMessages };
  if (fetchFn) cfg.fetch = fetchFn;
  return new HttpAgent(cfg);
}

// runOnce runs the agent once and checks the stream it saw. hooks.onEvent
// sees every event after the checks.
async function runOnce(agent, params, hooks = {}) {
  const what = `run ${params.runId}`;
  const rec = {
    runId: params.runId,
    threadId: agent.threadId,
    events: [],
    issues: [],
    lastSeq: 0,
    finishedParams: undefined,
    failedWith: undefined,
  };
  const mark = consoleLog.length;
  const subscriber = {
    onEvent({ event }) {
      const ev = jsonpatch.deepClone(event);
      const n = rec.events.length;
      const p = schemaProblem(ev);
      if (p) rec.issues.push(`event #${n} ${ev.type} does not validate against @ag-ui/core: ${p}: ${brief(ev)}`);
      const seq = seqOf(ev);
      if (!Number.isInteger(seq) || seq <= 0) {
        rec.issues.push(`event #${n} ${ev.type} has metadata.orrery.seq ${JSON.stringify(seq)}, want an integer > 0: ${brief(ev)}`);
      } else {
        if (seq <= rec.lastSeq) rec.issues.push(`event #${n} ${ev.type} has seq ${seq} after seq ${rec.lastSeq}; seqs must strictly increase`);
        rec.lastSeq = seq;
      }
      rec.events.push(ev);
      hooks.onEvent?.(ev, rec);
    },
    onRunFinishedEvent(p) {
      rec.finishedParams = { outcome: p.outcome, pendingToolCallIds: p.pendingToolCallIds, result: p.result };
    },
    onRunFailed({ error }) {
      rec.failedWith = error;
    },
  };
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      agent.abortRun();
      reject(new Failure(`${what}: runAgent did not settle within ${RUN_TIMEOUT_MS} ms; events so far: ${rec.events.map((e) => e.type).join(" ")}`));
    }, RUN_TIMEOUT_MS);
  });
  let res;
  try {
    res = await Promise.race([agent.runAgent(params, subscriber), timeout]);
  } catch (err) {
    if (err instanceof Failure) throw err;
    fail(`${what}: runAgent rejected: ${describe(err)}\nevents: ${rec.events.map((e) => e.type).join(" ")}`);
  } finally {
    clearTimeout(timer);
  }
  if (rec.failedWith) fail(`${what}: the run failed: ${describe(rec.failedWith)}`);
  checkConsole(mark, what);
  if (rec.issues.length > 0) fail(`${what}:\n  ` + rec.issues.join("\n  "));
  rec.result = res.result;
  rec.newMessageIds = res.newMessages.map((m) => m.id);
  checkStream(rec, what);
  rec.state = applyState(rec.events, what);
  if (!sameJSON(agent.state, rec.state)) {
    fail(`${what}: the client's state differs from STATE_SNAPSHOT + STATE_DELTAs: ${JSON.stringify(diff(agent.state, rec.state))}`);
  }
  return rec;
}

// checkStream checks the run's lifecycle as Orrery promises it: RUN_STARTED
// for this run, its STATE_SNAPSHOT, one terminal event and nothing after it,
// everything opened closed before a RUN_FINISHED.
function checkStream(rec, what) {
  const evs = rec.events;
  if (evs.length === 0) fail(`${what}: no events`);
  const start = evs[0];
  if (start.type !== "RUN_STARTED") fail(`${what}: the first event is ${start.type}, want RUN_STARTED`);
  if (start.runId !== rec.runId || start.threadId !== rec.threadId) {
    fail(`${what}: RUN_STARTED names thread ${start.threadId} run ${start.runId}, want thread ${rec.threadId} run ${rec.runId}`);
  }
  if (evs[1]?.type !== "STATE_SNAPSHOT") fail(`${what}: the second event is ${evs[1]?.type}, want the turn's STATE_SNAPSHOT`);
  const terminals = evs.filter((e) => TERMINAL.has(e.type));
  if (terminals.length !== 1) fail(`${what}: ${terminals.length} terminal events (${terminals.map((e) => e.type).join(", ")}), want exactly one`);
  const term = evs[evs.length - 1];
  if (!TERMINAL.has(term.type)) fail(`${what}: the stream ends with ${term.type}, not RUN_FINISHED or RUN_ERROR`);
  if (term.type === "RUN_FINISHED" && (term.runId !== rec.runId || term.threadId !== rec.threadId)) {
    fail(`${what}: RUN_FINISHED names thread ${term.threadId} run ${term.runId}`);
  }
  for (let i = 1; i < evs.length; i++) {
    if (seqOf(evs[i]) !== seqOf(evs[i - 1]) + 1) {
      fail(`${what}: seq ${seqOf(evs[i])} follows seq ${seqOf(evs[i - 1])} in the run's stream; a run's frames are contiguous in its session`);
    }
  }
  // What is still open when the terminal event arrives.
  const open = new Map();
  const key = (kind, id) => `${kind}:${id}`;
  for (const ev of evs.slice(0, -1)) {
    switch (ev.type) {
      case "TEXT_MESSAGE_START": open.set(key("text", ev.messageId), ev); break;
      case "TEXT_MESSAGE_END": open.delete(key("text", ev.messageId)); break;
      case "TOOL_CALL_START": open.set(key("toolCall", ev.toolCallId), ev); break;
      case "TOOL_CALL_END": open.delete(key("toolCall", ev.toolCallId)); break;
      case "REASONING_START": open.set(key("reasoningSpan", ev.messageId), ev); break;
      case "REASONING_END": open.delete(key("reasoningSpan", ev.messageId)); break;
      case "REASONING_MESSAGE_START": open.set(key("reasoningMessage", ev.messageId), ev); break;
      case "REASONING_MESSAGE_END": open.delete(key("reasoningMessage", ev.messageId)); break;
      case "STEP_STARTED": open.set(key("step", ev.stepName), ev); break;
      case "STEP_FINISHED": open.delete(key("step", ev.stepName)); break;
    }
  }
  rec.openAtTerminal = [...open.keys()];
  if (term.type === "RUN_FINISHED" && open.size > 0) fail(`${what}: RUN_FINISHED while ${rec.openAtTerminal.join(", ")} are open`);
  rec.terminal = term;
}

// summary is what the result line reports of a run.
function summary(rec, agent) {
  const byId = new Map(agent.messages.map((m) => [m.id, m]));
  const texts = [];
  const reasoning = [];
  const toolCalls = [];
  const toolResults = [];
  for (const ev of rec.events) {
    switch (ev.type) {
      case "TEXT_MESSAGE_START":
        texts.push({ messageId: ev.messageId, role: ev.role, deltas: [], content: undefined });
        break;
      case "TEXT_MESSAGE_CONTENT":
        texts.findLast((t) => t.messageId === ev.messageId).deltas.push(ev.delta);
        break;
      case "REASONING_MESSAGE_START":
        reasoning.push({ messageId: ev.messageId, deltas: [], content: undefined });
        break;
      case "REASONING_MESSAGE_CONTENT":
        reasoning.findLast((t) => t.messageId === ev.messageId).deltas.push(ev.delta);
        break;
      case "TOOL_CALL_START":
        toolCalls.push({ toolCallId: ev.toolCallId, toolCallName: ev.toolCallName, parentMessageId: ev.parentMessageId, args: "", ended: false });
        break;
      case "TOOL_CALL_ARGS":
        toolCalls.find((c) => c.toolCallId === ev.toolCallId).args += ev.delta;
        break;
      case "TOOL_CALL_END":
        toolCalls.find((c) => c.toolCallId === ev.toolCallId).ended = true;
        break;
      case "TOOL_CALL_RESULT":
        toolResults.push({ messageId: ev.messageId, toolCallId: ev.toolCallId, content: ev.content, role: ev.role, outcome: ev.metadata?.orrery?.outcome });
        break;
    }
  }
  for (const t of [...texts, ...reasoning]) {
    t.content = byId.get(t.messageId)?.content;
    if (t.content !== t.deltas.join("")) {
      fail(`run ${rec.runId}: message ${t.messageId} in agent.messages has content ${JSON.stringify(t.content)}, want its deltas joined ${JSON.stringify(t.deltas.join(""))}`);
    }
  }
  return {
    runId: rec.runId,
    types: rec.events.map((e) => e.type),
    firstSeq: seqOf(rec.events[0]),
    lastSeq: seqOf(rec.events[rec.events.length - 1]),
    terminal: rec.terminal,
    finished: rec.finishedParams,
    result: rec.result,
    newMessageIds: rec.newMessageIds,
    openAtTerminal: rec.openAtTerminal,
    texts,
    reasoning,
    toolCalls,
    toolResults,
    stateDeltas: rec.events.filter((e) => e.type === "STATE_DELTA").map((e) => e.delta),
    state: rec.state,
    kernelState: rec.kernelState,
  };
}

// checkKernel compares the run with the kernel's own view of the session:
// its state and conversation (GET /events snapshots), and its log.
async function checkKernel(rec, agent) {
  const what = `run ${rec.runId}`;
  const snap = await readKernelSnapshots(rec.threadId);
  rec.kernelState = snap.state;
  if (!sameJSON(rec.state, snap.state)) {
    fail(`${what}: STATE_SNAPSHOT + STATE_DELTAs give ${JSON.stringify(rec.state)}, but the kernel's state is ${JSON.stringify(snap.state)} (patch to it: ${JSON.stringify(diff(rec.state, snap.state))})`);
  }
  const ids = agent.messages.map((m) => m.id);
  const dups = ids.filter((id, i) => ids.indexOf(id) !== i);
  if (dups.length > 0) fail(`${what}: agent.messages repeats ids ${JSON.stringify([...new Set(dups)])}`);
  for (const m of agent.messages) {
    const r = MessageSchema.safeParse(m);
    if (!r.success) fail(`${what}: agent.messages entry ${m.id} does not validate: ${zodIssues(r)}`);
  }
  const client = new Map(agent.messages.map((m) => [m.id, comparableMessage(m)]));
  const kernel = new Map(snap.messages.map((m) => [m.id, comparableMessage(m)]));
  for (const [id, km] of kernel) {
    const cm = client.get(id);
    if (!cm) fail(`${what}: the kernel's MESSAGES_SNAPSHOT has ${km.role} message ${id}, which agent.messages lacks`);
    if (!sameJSON(cm, km)) fail(`${what}: message ${id}: the client holds ${JSON.stringify(cm)}, the kernel ${JSON.stringify(km)}`);
  }
  // The official client folds a sub-agent's messages (events with a
  // subagentRunId) into agent.messages; the kernel keeps them out of the
  // thread's MESSAGES_SNAPSHOT. Those, and only those, may be extra.
  const attributed = new Set(rec.events.filter((e) => e.subagentRunId && e.messageId).map((e) => e.messageId));
  rec.subagentMessages = [];
  for (const [id, cm] of client) {
    if (kernel.has(id)) continue;
    if (attributed.has(id)) {
      rec.subagentMessages.push(id);
      continue;
    }
    fail(`${what}: agent.messages has ${cm.role} message ${id}, which the kernel's MESSAGES_SNAPSHOT lacks`);
  }
}

// checkLog validates every logged frame, and checks that each streamed run
// is the log's slice from its RUN_STARTED to its terminal event, frame for
// frame, and that nothing follows the last run's terminal event.
async function checkLog(threadId, recs) {
  const log = await readLog(threadId);
  const frames = log.frames;
  if (log.head !== frames.length) fail(`session.read: head is ${log.head} but ${frames.length} frames came back from since 0`);
  frames.forEach((f, i) => {
    const p = schemaProblem(f);
    if (p) fail(`session.read: logged frame #${i} does not validate against @ag-ui/core: ${p}: ${brief(f)}`);
    if (seqOf(f) !== i + 1) fail(`session.read: logged frame #${i} has seq ${JSON.stringify(seqOf(f))}, want ${i + 1} (seqs run 1, 2, 3… with no gap)`);
  });
  for (const rec of recs) {
    const first = seqOf(rec.events[0]);
    const slice = frames.slice(first - 1, first - 1 + rec.events.length);
    const d = diff(rec.events, slice);
    if (d.length > 0) fail(`run ${rec.runId}: the streamed events differ from the logged frames ${first}..${first + rec.events.length - 1}: ${JSON.stringify(d).slice(0, 2000)}`);
  }
  const last = recs[recs.length - 1];
  if (last && seqOf(last.terminal) !== log.head) {
    fail(`session.read: the log goes on after run ${last.runId}'s terminal event (seq ${seqOf(last.terminal)}): ${frames.slice(seqOf(last.terminal)).map(brief).join("\n")}`);
  }
  await replayLog(threadId, frames);
  const runStarted = frames
    .filter((f) => f.type === "RUN_STARTED")
    .map((f) => ({ runId: f.runId, seq: seqOf(f), inputMessages: f.input?.messages ?? null }));
  return { head: log.head, types: frames.map((f) => f.type), runStarted, frames };
}

// replayLog feeds each logged run, RUN_STARTED to its terminal event, to a
// fresh HttpAgent through an injected fetch: the log must pass the official
// client's enforcement and verification as the live stream did.
async function replayLog(threadId, frames) {
  for (let i = 0; i < frames.length; i++) {
    if (frames[i].type !== "RUN_STARTED") continue;
    let j = i;
    while (j < frames.length && !TERMINAL.has(frames[j].type)) j++;
    if (j === frames.length) fail(`session.read: run ${frames[i].runId} (seq ${i + 1}) has no terminal event in the log`);
    const slice = frames.slice(i, j + 1);
    const body = slice.map((f) => `data: ${JSON.stringify(f)}\n\n`).join("");
    const agent = newAgent(threadId, [], async () => new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream" } }));
    const rec = await runOnce(agent, { runId: frames[i].runId }).catch((err) => {
      if (err instanceof Failure) fail(`replaying logged run ${frames[i].runId} through HttpAgent: ${err.message}`);
      throw err;
    });
    if (rec.events.length !== slice.length) fail(`replaying logged run ${frames[i].runId}: ${rec.events.length} events reached the client of ${slice.length}`);
    i = j;
  }
}

// ---------------------------------------------------------------------------
// Scenarios

function expect(cond, msg) {
  if (!cond) fail(msg);
}

function ofType(rec, type) {
  return rec.events.filter((e) => e.type === type);
}

function indexOfType(rec, type, pred = () => true) {
  return rec.events.findIndex((e) => e.type === type && pred(e));
}

function expectFinishedSuccess(rec) {
  const t = rec.terminal;
  expect(t.type === "RUN_FINISHED", `run ${rec.runId}: ends with ${t.type} ${brief(t)}, want RUN_FINISHED`);
  expect(t.outcome?.type === "success", `run ${rec.runId}: outcome ${JSON.stringify(t.outcome)}, want {type: "success"}`);
  expect(rec.finishedParams?.outcome === "success", `run ${rec.runId}: onRunFinishedEvent saw outcome ${rec.finishedParams?.outcome}, want success`);
  expect(sameJSON(rec.result, t.result), `run ${rec.runId}: runAgent resolved with result ${JSON.stringify(rec.result)}, want RUN_FINISHED.result ${JSON.stringify(t.result)}`);
}

function expectUsage(rec, result) {
  expect(result && typeof result === "object", `run ${rec.runId}: no usage result: ${JSON.stringify(result)}`);
  for (const k of ["micro_usd", "inputTokens", "outputTokens"]) {
    expect(Number.isInteger(result[k]) && result[k] >= 0, `run ${rec.runId}: result.${k} is ${JSON.stringify(result[k])}, want a whole number`);
  }
  const usage = rec.terminal.usage;
  expect(Array.isArray(usage) && usage.length > 0, `run ${rec.runId}: ${rec.terminal.type}.usage is ${JSON.stringify(usage)}, want a TokenUsage[] with an entry`);
  const sum = (k) => usage.reduce((n, u) => n + (u[k] ?? 0), 0);
  expect(sum("inputTokens") === result.inputTokens && sum("outputTokens") === result.outputTokens,
    `run ${rec.runId}: usage[] sums to ${sum("inputTokens")}/${sum("outputTokens")} tokens, result says ${result.inputTokens}/${result.outputTokens}`);
}

// expectToolRoundTrip checks a server tool call: START, ARGS, END, then its
// RESULT, and the STATE_DELTA that adds the call's surface.
function expectToolRoundTrip(rec, name) {
  const start = indexOfType(rec, "TOOL_CALL_START", (e) => e.toolCallName === name);
  expect(start >= 0, `run ${rec.runId}: no TOOL_CALL_START for ${name}: ${rec.events.map((e) => e.type).join(" ")}`);
  const id = rec.events[start].toolCallId;
  const args = indexOfType(rec, "TOOL_CALL_ARGS", (e) => e.toolCallId === id);
  const end = indexOfType(rec, "TOOL_CALL_END", (e) => e.toolCallId === id);
  const result = indexOfType(rec, "TOOL_CALL_RESULT", (e) => e.toolCallId === id);
  expect(start < args && args < end && end < result,
    `run ${rec.runId}: tool call ${id}: want TOOL_CALL_START < ARGS < END < RESULT, got indexes ${start} ${args} ${end} ${result}`);
  const argText = ofType(rec, "TOOL_CALL_ARGS").filter((e) => e.toolCallId === id).map((e) => e.delta).join("");
  const res = rec.events[result];
  expect(res.role === "tool", `run ${rec.runId}: TOOL_CALL_RESULT.role is ${JSON.stringify(res.role)}, want "tool"`);
  expect(res.metadata?.orrery?.outcome?.surface === id, `run ${rec.runId}: TOOL_CALL_RESULT metadata.orrery.outcome is ${JSON.stringify(res.metadata?.orrery?.outcome)}, want its surface ${id}`);
  const surfacePath = `/surfaces/${id.replaceAll("~", "~0").replaceAll("/", "~1")}`;
  const delta = rec.events.slice(result).find((e) => e.type === "STATE_DELTA" && e.delta.some((op) => op.op === "add" && op.path === surfacePath));
  expect(delta, `run ${rec.runId}: no STATE_DELTA adds ${surfacePath} after the tool result`);
  expect(rec.state.surfaces?.[id] !== undefined, `run ${rec.runId}: the final state has no surface ${id}: ${JSON.stringify(rec.state)}`);
  expect(rec.state.surfaces[id].kind?.value === res.content,
    `run ${rec.runId}: surface ${id} holds ${JSON.stringify(rec.state.surfaces[id])}, want the result text ${JSON.stringify(res.content)}`);
  return { id, args: argText, content: res.content, resultIndex: result };
}

// subagentSummary reports, for each event of the run as the client
// delivered it, its type and subagentRunId (an AG-UI 1.0 field the client
// must keep), and the sub-agent's messages the client folded into
// agent.messages.
function subagentSummary(rec) {
  return {
    events: rec.events.map((e) => ({ type: e.type, subagentRunId: e.subagentRunId ?? "", messageId: e.messageId ?? "" })),
    clientMessages: rec.subagentMessages,
  };
}

const scenarios = {
  async text(threadId) {
    const agent = newAgent(threadId, [{ id: "user-1", role: "user", content: "Say hello." }]);
    const rec = await runOnce(agent, { runId: "run-text-1" });
    await checkKernel(rec, agent);
    expectFinishedSuccess(rec);
    expectUsage(rec, rec.terminal.result);
    const contents = ofType(rec, "TEXT_MESSAGE_CONTENT");
    expect(contents.length >= 2, `run ${rec.runId}: ${contents.length} TEXT_MESSAGE_CONTENT events, want several chunks`);
    return { agent, recs: [rec] };
  },

  async reasoning(threadId) {
    const agent = newAgent(threadId, [{ id: "user-1", role: "user", content: "Think, then answer." }]);
    const rec = await runOnce(agent, { runId: "run-reasoning-1" });
    await checkKernel(rec, agent);
    expectFinishedSuccess(rec);
    const order = ["REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END"];
    const idx = order.map((t) => indexOfType(rec, t));
    expect(idx.every((v, i) => v >= 0 && (i === 0 || v > idx[i - 1])), `run ${rec.runId}: want ${order.join(" < ")}, got indexes ${idx.join(" ")}`);
    const rid = rec.events[idx[1]].messageId;
    const msg = agent.messages.find((m) => m.id === rid);
    expect(msg?.role === "reasoning", `run ${rec.runId}: agent.messages has no reasoning message ${rid}: ${JSON.stringify(agent.messages)}`);
    expect(indexOfType(rec, "TEXT_MESSAGE_START") > idx[4], `run ${rec.runId}: the text answer does not follow the reasoning`);
    return { agent, recs: [rec] };
  },

  async "server-tool"(threadId) {
    const agent = newAgent(threadId, [{ id: "user-1", role: "user", content: "Echo ping, please." }]);
    const rec = await runOnce(agent, { runId: "run-server-tool-1" });
    await checkKernel(rec, agent);
    expectFinishedSuccess(rec);
    const call = expectToolRoundTrip(rec, "echo");
    expect(call.content === JSON.parse(call.args).text, `run ${rec.runId}: echo ${call.args} returned ${JSON.stringify(call.content)}`);
    const toolMsg = agent.messages.find((m) => m.role === "tool" && m.toolCallId === call.id);
    expect(toolMsg?.content === call.content, `run ${rec.runId}: agent.messages has no tool message answering ${call.id} with ${JSON.stringify(call.content)}`);
    expect(indexOfType(rec, "TEXT_MESSAGE_START") > call.resultIndex, `run ${rec.runId}: no text answer after the tool result`);
    expect(rec.finishedParams.pendingToolCallIds.length === 0, `run ${rec.runId}: pendingToolCallIds ${JSON.stringify(rec.finishedParams.pendingToolCallIds)}, want none`);
    return { agent, recs: [rec] };
  },

  async "client-tool"(threadId) {
    const agent = newAgent(threadId, [{ id: "user-1", role: "user", content: "Ask me to confirm first." }]);
    const rec1 = await runOnce(agent, { runId: "run-client-tool-1", tools: [CLIENT_TOOL] });
    await checkKernel(rec1, agent);
    expectFinishedSuccess(rec1);
    const calls = ofType(rec1, "TOOL_CALL_START").filter((e) => e.toolCallName === CLIENT_TOOL.name);
    expect(calls.length === 1, `run ${rec1.runId}: ${calls.length} TOOL_CALL_START for ${CLIENT_TOOL.name}, want 1`);
    const callId = calls[0].toolCallId;
    expect(ofType(rec1, "TOOL_CALL_RESULT").length === 0, `run ${rec1.runId}: the server answered the client's tool itself`);
    expect(sameJSON(rec1.terminal.outcome, { type: "success", pendingToolCallIds: [callId] }),
      `run ${rec1.runId}: outcome ${JSON.stringify(rec1.terminal.outcome)}, want {type: "success", pendingToolCallIds: [${callId}]}`);
    expect(sameJSON(rec1.finishedParams.pendingToolCallIds, [callId]),
      `run ${rec1.runId}: onRunFinishedEvent pendingToolCallIds ${JSON.stringify(rec1.finishedParams.pendingToolCallIds)}, want [${callId}]`);

    const answer = { id: "tool-answer-1", role: "tool", toolCallId: callId, content: CLIENT_TOOL_ANSWER };
    agent.addMessage(answer);
    const rec2 = await runOnce(agent, { runId: "run-client-tool-2", tools: [CLIENT_TOOL] });
    await checkKernel(rec2, agent);
    expectFinishedSuccess(rec2);
    expect(ofType(rec2, "TEXT_MESSAGE_CONTENT").length > 0, `run ${rec2.runId}: no text streamed after the tool answer`);
    const input = rec2.events[0].input?.messages ?? [];
    expect(input.some((m) => sameJSON(comparableMessage(m), comparableMessage(answer))),
      `run ${rec2.runId}: RUN_STARTED.input.messages ${JSON.stringify(input)} lacks the tool answer ${JSON.stringify(answer)}`);
    return { agent, recs: [rec1, rec2], extra: { clientTool: CLIENT_TOOL.name, callId, answer } };
  },

  async cancel(threadId) {
    const agent = newAgent(threadId, [{ id: "user-1", role: "user", content: "Write something long." }]);
    let cancel;
    const rec = await runOnce(agent, { runId: "run-cancel-1" }, {
      onEvent(ev) {
        if (ev.type === "TEXT_MESSAGE_CONTENT" && !cancel) {
          cancel = control({ t: "run.cancel", id: "cancel-1", session: threadId });
        }
      },
    });
    expect(cancel, `run ${rec.runId}: no TEXT_MESSAGE_CONTENT arrived, so nothing was cancelled`);
    const reply = await cancel;
    expect(reply.status === 200, `run.cancel: status ${reply.status}: ${JSON.stringify(reply.value)}`);
    const t = rec.terminal;
    expect(t.type === "RUN_FINISHED" && sameJSON(t.outcome, { type: "cancelled" }),
      `run ${rec.runId}: ends with ${brief(t)}, want RUN_FINISHED with outcome {type: "cancelled"}`);
    expect(rec.finishedParams?.outcome === "cancelled", `run ${rec.runId}: onRunFinishedEvent saw outcome ${rec.finishedParams?.outcome}, want cancelled`);
    const starts = ofType(rec, "TEXT_MESSAGE_START").length;
    const ends = ofType(rec, "TEXT_MESSAGE_END").length;
    expect(starts > 0 && starts === ends, `run ${rec.runId}: ${starts} TEXT_MESSAGE_START, ${ends} TEXT_MESSAGE_END before RUN_FINISHED`);
    // Give a late frame of the cancelled loop time to reach the log.
    await sleep(400);
    await checkKernel(rec, agent);
    return { agent, recs: [rec], extra: { cancelReply: reply } };
  },

  async "provider-error"(threadId) {
    const agent = newAgent(threadId, [{ id: "user-1", role: "user", content: "Fail, please." }]);
    const rec = await runOnce(agent, { runId: "run-provider-error-1" });
    await checkKernel(rec, agent);
    const errs = ofType(rec, "RUN_ERROR");
    expect(errs.length === 1 && rec.terminal.type === "RUN_ERROR", `run ${rec.runId}: want exactly one RUN_ERROR, at the end: ${rec.events.map((e) => e.type).join(" ")}`);
    expect(ofType(rec, "RUN_FINISHED").length === 0, `run ${rec.runId}: has a RUN_FINISHED as well as its RUN_ERROR`);
    const e = rec.terminal;
    expect(typeof e.code === "string" && e.code !== "", `run ${rec.runId}: RUN_ERROR.code is ${JSON.stringify(e.code)}, want a code`);
    expect(typeof e.message === "string" && e.message !== "", `run ${rec.runId}: RUN_ERROR.message is empty`);
    expectUsage(rec, e.metadata?.orrery?.result);
    expect(rec.result === undefined, `run ${rec.runId}: runAgent resolved with result ${JSON.stringify(rec.result)} for a failed run`);
    return { agent, recs: [rec] };
  },

  async subagent(threadId) {
    const agent = newAgent(threadId, [{ id: "user-1", role: "user", content: "Delegate the greeting." }]);
    const rec = await runOnce(agent, { runId: "run-subagent-1" });
    await checkKernel(rec, agent);
    expectFinishedSuccess(rec);
    return { agent, recs: [rec], extra: { subagent: subagentSummary(rec) } };
  },

  async "subagent-cancel"(threadId) {
    const agent = newAgent(threadId, [{ id: "user-1", role: "user", content: "Delegate something endless." }]);
    let cancel;
    const rec = await runOnce(agent, { runId: "run-subagent-cancel-1" }, {
      onEvent(ev) {
        if (ev.type === "TEXT_MESSAGE_CONTENT" && ev.subagentRunId && !cancel) {
          cancel = control({ t: "run.cancel", id: "cancel-1", session: threadId });
        }
      },
    });
    expect(cancel, `run ${rec.runId}: no sub-agent TEXT_MESSAGE_CONTENT arrived, so nothing was cancelled`);
    const reply = await cancel;
    expect(reply.status === 200, `run.cancel: status ${reply.status}: ${JSON.stringify(reply.value)}`);
    const t = rec.terminal;
    expect(t.type === "RUN_FINISHED" && sameJSON(t.outcome, { type: "cancelled" }),
      `run ${rec.runId}: ends with ${brief(t)}, want RUN_FINISHED with outcome {type: "cancelled"}`);
    await sleep(400);
    await checkKernel(rec, agent);
    return { agent, recs: [rec], extra: { subagent: subagentSummary(rec) } };
  },

  async offline(threadId) {
    const agent = newAgent(threadId, [{ id: "user-1", role: "user", content: OFFLINE_PROMPT }]);
    const rec = await runOnce(agent, { runId: "run-offline-1" });
    await checkKernel(rec, agent);
    expectFinishedSuccess(rec);
    expectUsage(rec, rec.terminal.result);
    const call = expectToolRoundTrip(rec, "echo");
    const want = OFFLINE_PROMPT.replace(/^echo\s+/, "");
    expect(JSON.parse(call.args).text === want, `run ${rec.runId}: echo called with ${call.args}, want text ${JSON.stringify(want)}`);
    expect(call.content === want, `run ${rec.runId}: TOOL_CALL_RESULT content ${JSON.stringify(call.content)}, want ${JSON.stringify(want)}`);
    const after = rec.events.slice(call.resultIndex).filter((e) => e.type === "TEXT_MESSAGE_CONTENT");
    expect(after.length > 0, `run ${rec.runId}: no text answer after the tool result`);
    return { agent, recs: [rec] };
  },
};

// ---------------------------------------------------------------------------

async function main() {
  const run = scenarios[args.scenario];
  if (!run) fail(`unknown scenario ${JSON.stringify(args.scenario)}: use one of ${Object.keys(scenarios).join(", ")}`);
  const threadId = `thread-${args.scenario}`;
  const { agent, recs, extra } = await run(threadId);
  const log = await checkLog(threadId, recs);
  checkConsole(0, "the whole program");
  const runs = recs.map((rec) => summary(rec, agent));
  return {
    ok: true,
    scenario: args.scenario,
    threadId,
    runs,
    messages: agent.messages.map(comparableMessage),
    log: { head: log.head, types: log.types, runStarted: log.runStarted },
    ...extra,
  };
}

main().then(
  (out) => {
    process.stdout.write(JSON.stringify(out) + "\n");
    process.exit(0);
  },
  (err) => {
    const msg = err instanceof Failure ? err.message : `unexpected error: ${err?.stack ?? inspect(err)}`;
    process.stderr.write(`FAIL ${args.scenario}: ${msg}\n`);
    process.exit(1);
  },
);
