// ui.mjs follows a session's whole stream the way a browser client would
// and rebuilds its shared UI state with fast-json-patch: it reads
// GET /events?since=0 until it has the session's head, checks every frame
// with @ag-ui/core's EventSchemas, applies STATE_SNAPSHOT and each
// STATE_DELTA (RFC 6902, validated), then compares the result with the
// kernel's own state, the seq-0 STATE_SNAPSHOT of GET /events without since.
//
//   node ui.mjs --url http://127.0.0.1:PORT --session ID --head N
//
// It prints one JSON line {ok, frames, nodes, state} and exits 1 on failure.

import { parseArgs, isDeepStrictEqual } from "node:util";
import { EventSchemas } from "@ag-ui/core/schemas";
import jsonpatch from "fast-json-patch";

const { values: args } = parseArgs({
  options: { url: { type: "string" }, session: { type: "string" }, head: { type: "string" } },
});
const head = Number(args.head);

// sse yields the parsed data of each SSE event until stop() says so.
async function sse(path, stop) {
  const ctrl = new AbortController();
  const res = await fetch(args.url + path, { signal: ctrl.signal });
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  const out = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (data === "") continue;
        const frame = JSON.parse(data);
        out.push(frame);
        if (stop(frame, out)) return out;
      }
    }
  } finally {
    ctrl.abort();
  }
  throw new Error(`GET ${path} ended after ${out.length} frames`);
}

try {
  const frames = await sse(`/events?session=${encodeURIComponent(args.session)}&since=0`, (f) => f.metadata?.orrery?.seq === head);
  let state = null;
  frames.forEach((frame, i) => {
    const parsed = EventSchemas.safeParse(frame);
    if (!parsed.success) throw new Error(`frame ${i + 1}: @ag-ui/core rejects ${frame.type}: ${parsed.error.message}`);
    if (frame.metadata.orrery.seq !== i + 1) throw new Error(`frame ${i + 1} has seq ${frame.metadata.orrery.seq}`);
    if (frame.type === "STATE_SNAPSHOT") state = structuredClone(frame.snapshot);
    if (frame.type === "STATE_DELTA") {
      if (state === null) throw new Error(`frame ${i + 1}: a STATE_DELTA before any STATE_SNAPSHOT`);
      const err = jsonpatch.validate(frame.delta, state);
      if (err) throw new Error(`frame ${i + 1}: invalid delta ${JSON.stringify(frame.delta)}: ${err.message}`);
      state = jsonpatch.applyPatch(state, frame.delta, true, false).newDocument;
    }
  });
  const [snap] = await sse(`/events?session=${encodeURIComponent(args.session)}`, (f) => f.type === "STATE_SNAPSHOT");
  if (snap.metadata.orrery.seq !== 0) throw new Error(`the snapshot has seq ${snap.metadata.orrery.seq}, want 0`);
  if (!isDeepStrictEqual(state, snap.snapshot)) {
    throw new Error(`fast-json-patch state = ${JSON.stringify(state)}\nwant the kernel's ${JSON.stringify(snap.snapshot)}`);
  }
  console.log(JSON.stringify({ ok: true, frames: frames.length, nodes: Object.keys(state.ui.nodes).sort(), state }));
} catch (err) {
  console.error(`FAIL: ${err.stack ?? err}`);
  process.exit(1);
}
