// live.mjs is bundled (esbuild) into the page a2ui_live_test.go serves
// beside an Orrery server. It follows a session's A2UI face
// (GET /events?session=…&a2ui=1) with EventSource and draws every
// ACTIVITY_SNAPSHOT a2ui-surface with the official @a2ui/lit renderer
// (basic catalog, @a2ui/web_core's MessageProcessor). Each snapshot is the
// whole surface: for a surface it already draws, the page skips
// createSurface and applies the rest (updateComponents replaces each
// component whole, updateDataModel the data), so the drawn element updates
// in place. An action the renderer sends goes back with a2ui.action on
// POST /control. window.a2uiPage lets the test read what is drawn and
// press buttons.
import { MessageProcessor } from "@a2ui/web_core/v0_9";
import { basicCatalog } from "@a2ui/lit/v0_9";

const session = new URLSearchParams(location.search).get("session");
const app = document.getElementById("app");
const page = { ops: [], snapshots: 0, actions: [], replies: [], errors: [] };
window.a2uiPage = page;

let n = 0;
const proc = new MessageProcessor([basicCatalog], async (action) => {
  page.actions.push(action);
  try {
    const r = await fetch("/control", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ t: "a2ui.action", id: `act-${++n}`, session, message: action }),
    });
    page.replies.push({ status: r.status, body: await r.json() });
  } catch (e) {
    page.errors.push(String(e));
  }
});
proc.onSurfaceCreated((surface) => {
  const el = document.createElement("a2ui-surface");
  el.dataset.surface = surface.id;
  el.surface = surface;
  app.appendChild(el);
});
proc.onSurfaceDeleted((id) => {
  const key = typeof id === "string" ? id : id && id.id;
  for (const el of app.querySelectorAll("a2ui-surface")) {
    if (el.dataset.surface === key) el.remove();
  }
});

const events = new EventSource(`/events?session=${encodeURIComponent(session)}&a2ui=1`);
events.onmessage = (m) => {
  const ev = JSON.parse(m.data);
  if (ev.type !== "ACTIVITY_SNAPSHOT" || ev.activityType !== "a2ui-surface") return;
  page.snapshots++;
  try {
    for (const op of ev.content.a2ui_operations) {
      page.ops.push(op);
      if (op.createSurface && proc.model.getSurface(op.createSurface.surfaceId)) continue;
      proc.processMessage(op);
    }
  } catch (e) {
    page.errors.push(String(e && e.stack ? e.stack : e));
  }
};
events.onerror = () => page.errors.push("EventSource error");

// text returns the text drawn for surface id, shadow roots included.
page.text = (id) => {
  const out = [];
  const walk = (node) => {
    if (node.nodeType === Node.TEXT_NODE) {
      const t = node.textContent.trim();
      if (t) out.push(t);
    }
    if (node.nodeType === Node.ELEMENT_NODE) {
      if (node.localName === "script" || node.localName === "style") return;
      if (node.shadowRoot) walk(node.shadowRoot);
    }
    for (const c of node.childNodes) walk(c);
  };
  for (const el of app.querySelectorAll("a2ui-surface")) {
    if (id === undefined || el.dataset.surface === id) walk(el);
  }
  return out.join(" | ");
};

const findDeep = (root, sel) => {
  const hit = root.querySelector(sel);
  if (hit) return hit;
  for (const el of root.querySelectorAll("*")) {
    if (el.shadowRoot) {
      const h = findDeep(el.shadowRoot, sel);
      if (h) return h;
    }
  }
  return null;
};

// press clicks the first button of surface id; it reports whether there
// was one.
page.press = (id) => {
  const el = [...app.querySelectorAll("a2ui-surface")].find((e) => e.dataset.surface === id);
  const button = el && findDeep(el.shadowRoot || el, "button");
  if (!button) return false;
  button.click();
  return true;
};
