// An ACP client (an editor) for Orrery's tests, on the official
// @agentclientprotocol/sdk: it drives the agent on its stdin and stdout
// through initialize, session/new, one prompt (allowing every permission
// with the agent's allow_once option) and session/load, and writes what
// it saw as JSON to the file named by its second argument.
import { client, ndJsonStream } from "@agentclientprotocol/sdk";
import { Readable, Writable } from "node:stream";
import { writeFileSync } from "node:fs";

const [cwd, reportPath, prompt = "write it"] = process.argv.slice(2);
const updates = [];
const asked = [];
const app = client({ name: "orrery-test-editor" })
  .onRequest("session/request_permission", async ({ params }) => {
    asked.push(params);
    const allow = params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  })
  .onNotification("session/update", async ({ params }) => {
    updates.push(params.update);
  });

const stream = ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const report = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  const session = await ctx.request("session/new", { cwd, mcpServers: [] });
  const res = await ctx.request("session/prompt", { sessionId: session.sessionId, prompt: [{ type: "text", text: prompt }] });
  const turn = updates.splice(0);
  await ctx.request("session/load", { sessionId: session.sessionId, cwd, mcpServers: [] });
  const loaded = updates.splice(0);
  return { init, sessionId: session.sessionId, stopReason: res.stopReason, turn, loaded, asked };
});
writeFileSync(reportPath, JSON.stringify(report, null, 2));
process.exit(0);
