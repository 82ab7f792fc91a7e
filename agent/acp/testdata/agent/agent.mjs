// A deterministic ACP agent for Orrery's tests, written on the official
// @agentclientprotocol/sdk. The first word of a prompt picks the scenario:
//
//   text        thought, two message chunks, a plan and usage, end_turn
//   tool        a tool call with a diff, permission asked; allowed or rejected
//   unannounced a permission for a tool call never announced
//   execute     a permission to run the rest of the prompt as a command line
//   argv        the same, with the rest of the prompt a JSON array: an argv
//   claude      runs the rest of the prompt as Claude Code's adapter
//               (claude-agent-acp 0.101) announces a Bash call: "Terminal"
//               with {}, refined by tool_call_updates, then the permission
//   gemini      asks to run the rest of the prompt as Gemini CLI does: a
//               permission for an unannounced call whose command is only its
//               title; a rejected call is never reported again
//   wait        a permission that stays pending until the turn is cancelled
//   withdraw    a permission the agent withdraws with $/cancel_request
//   unknown     an update variant the schema does not know, kept raw
//   crash       one chunk, then the process exits
//   refuse      two lines on stderr, then an error answer with data.details
//   noise       a line that is not JSON on stdout, then text
//   after       text, end_turn, then an update after the turn
//   context     usage updates (context window) in and after the turn
//   big         one 100 KiB chunk
//   slow        text, then waits for session/cancel
//   echo        echoes the prompt's blocks as JSON
//   session     echoes session/new's cwd and mcpServers as JSON
//   pid         says the agent's process id
//
// Flags: --auth makes session/new fail with -32000; --ignore-cancel ignores
// session/cancel (the turn never ends); --load advertises session/load;
// --mcp-http advertises MCP servers over HTTP (mcpCapabilities.http);
// --stubborn ignores SIGTERM and the end of stdin, so only SIGKILL ends it.
import { agent, ndJsonStream, RequestError } from "@agentclientprotocol/sdk";
import { Readable, Writable } from "node:stream";

const flags = new Set(process.argv.slice(2));
const sessions = new Map(); // id -> {cancel: () => void, history: []}
let nextSession = 1;

function wait(ms, signal) {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => { clearTimeout(t); resolve(); });
  });
}

const app = agent({ name: "orrery-test-agent" })
  .onRequest("initialize", async () => ({
    protocolVersion: 1,
    agentCapabilities: {
      loadSession: flags.has("--load"),
      promptCapabilities: { image: false, audio: false, embeddedContext: false },
      mcpCapabilities: { http: flags.has("--mcp-http"), sse: false },
    },
    agentInfo: { name: "orrery-test-agent", version: "1.0.0" },
    authMethods: flags.has("--auth") ? [{ id: "test-login", name: "Log in", description: "run test-agent login" }] : [],
  }))
  .onRequest("session/new", async ({ params, client }) => {
    if (flags.has("--auth")) {
      throw new RequestError(-32000, "Authentication required");
    }
    const sessionId = `sess_${nextSession++}`;
    sessions.set(sessionId, { cancel: null, cwd: params.cwd, mcp: params.mcpServers });
    // An update before the session/new reply: the client must buffer it.
    await client.notify("session/update", {
      sessionId,
      update: { sessionUpdate: "available_commands_update", availableCommands: [{ name: "test", description: "Run the tests" }] },
    });
    return { sessionId };
  })
  .onRequest("session/load", async ({ params, client }) => {
    sessions.set(params.sessionId, { cancel: null, cwd: params.cwd });
    await client.notify("session/update", {
      sessionId: params.sessionId,
      update: { sessionUpdate: "user_message_chunk", content: { type: "text", text: "(replayed)" } },
    });
    return {};
  })
  .onNotification("session/cancel", async ({ params }) => {
    process.stderr.write(`cancel ${params.sessionId}\n`);
    if (flags.has("--ignore-cancel")) return;
    sessions.get(params.sessionId)?.cancel?.();
  })
  .onRequest("session/prompt", async ({ params, client, signal }) => {
    const sessionId = params.sessionId;
    const s = sessions.get(sessionId);
    if (!s) throw new RequestError(-32002, "Resource not found", { sessionId });
    const ac = new AbortController();
    s.cancel = () => ac.abort();
    if (!flags.has("--ignore-cancel")) signal?.addEventListener("abort", () => ac.abort());
    process.stderr.write(`prompt ${JSON.stringify(params.prompt[0])}\n`);
    const first = params.prompt.find((b) => b.type === "text")?.text ?? "";
    const scenario = first.split(/\s+/)[0];
    const update = (u) => client.notify("session/update", { sessionId, update: u });
    const say = (text, id = "msg_1") => update({ sessionUpdate: "agent_message_chunk", messageId: id, content: { type: "text", text } });
    const ask = (toolCall, extra) => client.request("session/request_permission", {
      sessionId,
      toolCall,
      options: [
        { optionId: "yes", name: "Allow once", kind: "allow_once" },
        { optionId: "always", name: "Always allow", kind: "allow_always" },
        { optionId: "no", name: "Reject", kind: "reject_once" },
      ],
      ...extra,
    });
    try {
      switch (scenario) {
        case "text":
          await update({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "Thinking it over." } });
          await say("Hello, ");
          await say("world.");
          await update({ sessionUpdate: "plan", entries: [
            { content: "Read the code", priority: "high", status: "completed" },
            { content: "Write the answer", priority: "medium", status: "in_progress" },
          ] });
          await update({ sessionUpdate: "usage_update", used: 1200, size: 200000, cost: { amount: 0.0125, currency: "USD" } });
          return { stopReason: "end_turn" };
        case "tool":
        case "unannounced": {
          const call = { toolCallId: "call_1", title: "Edit notes.txt", kind: "edit", status: "pending",
            rawInput: { path: "/tmp/notes.txt" },
            content: [{ type: "diff", path: "/tmp/notes.txt", oldText: "old\n", newText: "new\n" }] };
          if (scenario === "tool") await update({ sessionUpdate: "tool_call", ...call });
          const res = await ask(scenario === "tool" ? { toolCallId: "call_1" } : call);
          const o = res.outcome;
          if (o.outcome === "cancelled") return { stopReason: "cancelled" };
          const allowed = o.optionId === "yes" || o.optionId === "always";
          await update({ sessionUpdate: "tool_call_update", toolCallId: "call_1", status: allowed ? "completed" : "failed",
            content: [{ type: "content", content: { type: "text", text: allowed ? "edited" : "not edited" } }] });
          await say(`chose ${o.optionId}`, "msg_2");
          return { stopReason: "end_turn" };
        }
        case "execute": {
          const command = first.slice("execute ".length);
          await update({ sessionUpdate: "tool_call", toolCallId: "call_e", title: "Run a command", kind: "execute",
            status: "pending", rawInput: { command } });
          const res = await ask({ toolCallId: "call_e" });
          if (res.outcome.outcome === "cancelled") return { stopReason: "cancelled" };
          await say(`chose ${res.outcome.optionId}`);
          return { stopReason: "end_turn" };
        }
        case "argv": {
          const command = JSON.parse(first.slice("argv ".length));
          await update({ sessionUpdate: "tool_call", toolCallId: "call_v", title: "Run a command", kind: "execute",
            status: "pending", rawInput: { command } });
          const res = await ask({ toolCallId: "call_v" });
          if (res.outcome.outcome === "cancelled") return { stopReason: "cancelled" };
          await say(`chose ${res.outcome.optionId}`);
          return { stopReason: "end_turn" };
        }
        case "claude": {
          const command = first.slice("claude ".length);
          const id = "toolu_01";
          // The stream's first sight of the tool use: no input yet.
          await update({ sessionUpdate: "tool_call", toolCallId: id, title: "Terminal", kind: "execute", status: "pending", rawInput: {} });
          // Refinements as the input streams in: rawInput grows.
          await update({ sessionUpdate: "tool_call_update", toolCallId: id, title: command.slice(0, 3), rawInput: { command: command.slice(0, 3) } });
          await update({ sessionUpdate: "tool_call_update", toolCallId: id, title: command, rawInput: { command, description: "Run it" } });
          const res = await ask({ toolCallId: id, name: "Bash", status: "pending", rawInput: { command, description: "Run it" }, title: command, kind: "execute", content: [] });
          if (res.outcome.outcome === "cancelled") return { stopReason: "cancelled" };
          const allowed = res.outcome.optionId === "yes" || res.outcome.optionId === "always";
          if (allowed) await update({ sessionUpdate: "tool_call_update", toolCallId: id, status: "in_progress" });
          await update({ sessionUpdate: "tool_call_update", toolCallId: id, status: allowed ? "completed" : "failed",
            content: [{ type: "content", content: { type: "text", text: allowed ? "ran" : "The user doesn't want to proceed with this tool use." } }] });
          await say(`chose ${res.outcome.optionId}`, "msg_2");
          return { stopReason: "end_turn" };
        }
        case "gemini": {
          const command = first.slice("gemini ".length);
          const id = "run_shell_command-1";
          const res = await ask({ toolCallId: id, title: command, kind: "execute", status: "pending", content: [] });
          if (res.outcome.outcome === "cancelled") return { stopReason: "cancelled" };
          const allowed = res.outcome.optionId === "yes" || res.outcome.optionId === "always";
          if (allowed) {
            await update({ sessionUpdate: "tool_call_update", toolCallId: id, status: "completed",
              content: [{ type: "content", content: { type: "text", text: "ran" } }] });
          }
          await say(`chose ${res.outcome.optionId}`, "msg_2");
          return { stopReason: "end_turn" };
        }
        case "wait": {
          await update({ sessionUpdate: "tool_call", toolCallId: "call_w", title: "Run rm", kind: "execute", status: "pending" });
          const res = await ask({ toolCallId: "call_w" });
          if (res.outcome.outcome === "cancelled") return { stopReason: "cancelled" };
          await say(`chose ${res.outcome.optionId}`);
          return { stopReason: "end_turn" };
        }
        case "withdraw": {
          await update({ sessionUpdate: "tool_call", toolCallId: "call_x", title: "Fetch a page", kind: "fetch", status: "pending" });
          const pending = ask({ toolCallId: "call_x" }, {});
          await wait(300);
          // The SDK numbers this connection's requests from 0; the
          // permission is the first request the agent made.
          await client.notify("$/cancel_request", { requestId: Number(process.env.WITHDRAW_ID ?? 0) });
          const res = await pending;
          await say(`withdrawn: ${res.outcome.outcome}`);
          return { stopReason: "end_turn" };
        }
        case "unknown":
          await update({ sessionUpdate: "compaction_summary_chunk", content: { type: "text", text: "summary" }, futureField: true });
          await say("after unknown");
          return { stopReason: "end_turn" };
        case "refuse":
          // The lines are handed to the pipe, and given a moment to be read,
          // before the answer goes out on stdout.
          await new Promise((r) => process.stderr.write("loading model config\nquota check failed: 429 from upstream\n", r));
          await wait(50);
          throw new RequestError(-32603, "Internal error", { details: "the model quota is used up" });
        case "crash":
          await say("about to crash");
          setTimeout(() => process.exit(3), 20);
          await wait(10000);
          return { stopReason: "end_turn" };
        case "noise":
          process.stdout.write("this is not json\n");
          await say("after noise");
          return { stopReason: "end_turn" };
        case "context":
          // The context window as it fills: without a cost, then with one,
          // one update the schema does not allow (no used), and one after
          // the turn.
          await update({ sessionUpdate: "usage_update", used: 5000, size: 200000 });
          await say("filling");
          await update({ sessionUpdate: "usage_update", used: 6400, size: 200000, cost: { amount: 0.002, currency: "USD" } });
          await update({ sessionUpdate: "usage_update", size: 200000 });
          setTimeout(() => { update({ sessionUpdate: "usage_update", used: 7000, size: 200000 }); }, 100);
          return { stopReason: "end_turn" };
        case "after":
          await say("before the end");
          setTimeout(() => { say("after the end", "msg_late"); }, 100);
          return { stopReason: "end_turn" };
        case "big":
          await say("x".repeat(100 * 1024));
          return { stopReason: "end_turn" };
        case "slow":
          await say("working");
          await wait(30000, ac.signal);
          return { stopReason: ac.signal.aborted ? "cancelled" : "end_turn" };
        case "session":
          await say(JSON.stringify({ cwd: s.cwd, mcpServers: s.mcp }));
          return { stopReason: "end_turn" };
        case "pid":
          await say(String(process.pid));
          return { stopReason: "end_turn" };
        case "echo":
          await say(JSON.stringify(params.prompt));
          return { stopReason: "end_turn" };
        default:
          await say(`unknown scenario ${scenario}`);
          return { stopReason: "refusal" };
      }
    } finally {
      s.cancel = null;
    }
  });

if (flags.has("--stubborn")) {
  process.on("SIGTERM", () => process.stderr.write("ignoring SIGTERM\n"));
  setInterval(() => {}, 1000);
}
app.connect(ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
process.stderr.write("test agent ready\n");
