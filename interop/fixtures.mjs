// fixtures.mjs replays Orrery's conformance fixtures (protocol/fixtures)
// the way a third-party JavaScript client would: every frame must parse
// with the official @ag-ui/core 1.0 EventSchemas, carry
// metadata.orrery.seq in order (seq-0 snapshots aside, a coalesced frame
// standing for merged_from..seq) and never a "t"; the shared state is
// rebuilt with fast-json-patch (STATE_SNAPSHOT, then each STATE_DELTA
// applied as RFC 6902) and must equal <name>.expected.json's state.
//
//   node fixtures.mjs --dir ../protocol/fixtures
//
// It prints one JSON line {ok, fixtures: [{name, ok, frames, error?}]} and
// exits 1 when any fixture fails. Run by fixtures_test.go.

import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { parseArgs, isDeepStrictEqual } from "node:util";
import { EventSchemas } from "@ag-ui/core/schemas";
import jsonpatch from "fast-json-patch";

const { values: args } = parseArgs({ options: { dir: { type: "string", default: "../protocol/fixtures" } } });

function replay(dir, name) {
  const lines = readFileSync(join(dir, `${name}.jsonl`), "utf8").split("\n").filter((l) => l !== "");
  const expected = JSON.parse(readFileSync(join(dir, `${name}.expected.json`), "utf8"));
  let state = null;
  let last = null;
  lines.forEach((line, i) => {
    const where = `${name}.jsonl line ${i + 1}`;
    const frame = JSON.parse(line);
    if ("t" in frame) throw new Error(`${where}: a frame has a "t"`);
    const parsed = EventSchemas.safeParse(frame);
    if (!parsed.success) throw new Error(`${where}: @ag-ui/core rejects the ${frame.type} frame: ${parsed.error.message}`);
    const meta = frame.metadata?.orrery;
    if (!meta || typeof meta.seq !== "number") throw new Error(`${where}: no metadata.orrery.seq`);
    if (meta.seq > 0) {
      const first = meta.merged_from ?? meta.seq;
      if (last !== null && first !== last + 1) throw new Error(`${where}: seq ${first} does not follow ${last}`);
      last = meta.seq;
    }
    switch (frame.type) {
      case "STATE_SNAPSHOT":
        state = structuredClone(frame.snapshot);
        break;
      case "STATE_DELTA":
        try {
          state = jsonpatch.applyPatch(state, frame.delta, true, false).newDocument;
        } catch (err) {
          throw new Error(`${where}: the STATE_DELTA does not apply: ${err.message}`);
        }
        break;
    }
  });
  if (!isDeepStrictEqual(state, expected.state)) {
    throw new Error(`state = ${JSON.stringify(state)}, want ${JSON.stringify(expected.state)}`);
  }
  return lines.length;
}

const names = readdirSync(args.dir)
  .filter((f) => f.endsWith(".jsonl"))
  .map((f) => f.slice(0, -".jsonl".length))
  .sort();
const fixtures = names.map((name) => {
  try {
    return { name, ok: true, frames: replay(args.dir, name) };
  } catch (err) {
    return { name, ok: false, error: err.message };
  }
});
const ok = fixtures.length > 0 && fixtures.every((f) => f.ok);
console.log(JSON.stringify({ ok, fixtures }));
process.exit(ok ? 0 : 1);
