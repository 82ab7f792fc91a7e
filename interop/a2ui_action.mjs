#!/usr/bin/env node
// a2ui_action.mjs sends A2UI actions to an Orrery server's POST /run?a2ui=1
// the way an A2UI renderer for AG-UI does: the official @ag-ui/client's
// HttpAgent.runAgent with forwardedProps.a2uiAction.userAction.
//
//   node a2ui_action.mjs --url http://127.0.0.1:PORT --thread ID \
//     --action '{"name":…}' --refused '{"name":…}'
//
// The first run carries --action and must succeed with no client warning;
// every event must validate against @ag-ui/core's schema. The second
// carries --refused and must be rejected by the server. It prints one JSON
// line: the first run's event types, the A2UI activity messages the client
// holds after it, and the second run's error.
import { parseArgs, inspect } from "node:util";
import { HttpAgent } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";

delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;

const warnings = [];
for (const level of ["warn", "error"]) {
  console[level] = (...args) => {
    const text = args.map((a) => (typeof a === "string" ? a : inspect(a, { depth: 4 }))).join(" ");
    warnings.push(`console.${level}: ${text}`);
    process.stderr.write(`[console.${level}] ${text}\n`);
  };
}

const schemaByType = new Map(EventSchemas.options.map((s) => [s.shape.type.value, s]));

async function main() {
  const { values } = parseArgs({
    options: { url: { type: "string" }, thread: { type: "string" }, action: { type: "string" }, refused: { type: "string" } },
  });
  const agent = new HttpAgent({ url: `${values.url}/run?a2ui=1`, threadId: values.thread });
  const types = [];
  const problems = [];
  await agent.runAgent(
    { forwardedProps: { a2uiAction: { userAction: JSON.parse(values.action) } } },
    {
      onEvent: ({ event }) => {
        types.push(event.type);
        const schema = schemaByType.get(event.type);
        const r = schema ? schema.safeParse(event) : { success: false, error: { issues: [{ path: [], message: "unknown type" }] } };
        if (!r.success) problems.push(`${event.type}: ${r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
      },
    },
  );
  if (problems.length) throw new Error(`events fail their schema: ${problems.join(" | ")}`);
  if (warnings.length) throw new Error(`the client warned:\n${warnings.join("\n")}`);
  const activities = agent.messages
    .filter((m) => m.role === "activity")
    .map((m) => ({ id: m.id, activityType: m.activityType, content: m.content }));

  let refused = "";
  const second = new HttpAgent({ url: `${values.url}/run?a2ui=1`, threadId: values.thread });
  try {
    await second.runAgent({ forwardedProps: { a2uiAction: { userAction: JSON.parse(values.refused) } } });
  } catch (e) {
    refused = String(e && e.message ? e.message : e);
  }
  warnings.length = 0; // the client logs the failed run it was told to expect
  return { ok: true, types, activities, refused };
}

main().then(
  (r) => process.stdout.write(JSON.stringify(r) + "\n"),
  (e) => {
    process.stderr.write(`FAIL: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
  },
);
