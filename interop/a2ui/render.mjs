// render.mjs is bundled (esbuild) into the page a2ui_test.go serves. It
// draws the A2UI messages in <script id="messages"> with the official
// @a2ui/lit renderer (basic catalog, @a2ui/web_core's MessageProcessor),
// presses the first button, and writes what it drew and the actions the
// renderer sent into <pre id="result">, which headless Chromium's
// --dump-dom prints.
import { MessageProcessor } from "@a2ui/web_core/v0_9";
import { basicCatalog } from "@a2ui/lit/v0_9";

const out = document.getElementById("result");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// walk collects the text and element names of the composed tree, shadow
// roots included.
function walk(node, acc) {
  if (node.nodeType === Node.TEXT_NODE) {
    const t = node.textContent.trim();
    if (t) acc.text.push(t);
  }
  if (node.nodeType === Node.ELEMENT_NODE) {
    if (node.localName === "script" || node.localName === "style") return;
    acc.tags.push(node.localName);
    if (node.shadowRoot) walk(node.shadowRoot, acc);
  }
  for (const c of node.childNodes) walk(c, acc);
}

function findDeep(root, sel) {
  const hit = root.querySelector(sel);
  if (hit) return hit;
  for (const el of root.querySelectorAll("*")) {
    if (el.shadowRoot) {
      const h = findDeep(el.shadowRoot, sel);
      if (h) return h;
    }
  }
  return null;
}

async function main() {
  const actions = [];
  const errors = [];
  const proc = new MessageProcessor([basicCatalog], (a) => actions.push(a));
  let surface;
  proc.onSurfaceCreated((s) => (surface = s));
  const messages = JSON.parse(document.getElementById("messages").textContent);
  proc.processMessages(messages);
  if (!surface) throw new Error("no surface was created");
  const el = document.createElement("a2ui-surface");
  el.surface = surface;
  document.getElementById("app").appendChild(el);
  for (let i = 0; i < 20; i++) {
    await sleep(50);
    await el.updateComplete;
  }
  const drawn = { text: [], tags: [] };
  walk(document.getElementById("app"), drawn);
  const button = findDeep(document.getElementById("app"), "button");
  if (button) {
    button.click();
    for (let i = 0; i < 10; i++) await sleep(50);
  }
  return { text: drawn.text, tags: [...new Set(drawn.tags)], pressed: !!button, actions, errors };
}

main().then(
  (r) => (out.textContent = JSON.stringify({ ok: true, ...r })),
  (e) => (out.textContent = JSON.stringify({ ok: false, error: String(e && e.stack ? e.stack : e) })),
);
