package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/getorrery/orrery/kernel"
)

// These tests put a real Chromium page on another origin against the trust
// boundary (docs/security.md). The page comes from a second server: once
// from http://127.0.0.1:<its port> (another origin of the same site) and
// once from http://attacker.test:<its port>, a name Chromium resolves to
// 127.0.0.1 (another site). Its script makes every request it can, then
// reports done. The rig is armed: a request that got past the boundary
// could start any command, and the shell may touch files without asking,
// so every payload names a canary file that its command would create.
// TestAttackPayloadsWorkFromAProgram shows they would. For each attack the
// test shows that the server received the request (the rig logs its URL
// and answer) and refused it, that no canary exists, that the session list
// and an existing session's log are unchanged, and that no consenting
// client was attached.

// attackerPage is the attacker's page; cfg is replaced with its attacks.
// Every step settles (a fetch resolves or rejects, a form's answer loads in
// its frame, a WebSocket closes) before the next starts, and the page sets
// window.done when all have.
const attackerPage = `<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>a page on another site</title></head>
<body><script>
const cfg = /*cfg*/;
let seq = 0;

// body is the step's body: name=value, which for text/plain is the JSON
// payload itself (its first "=" sits inside a string).
function body(s) {
  switch (s.enc) {
  case "urlencoded": return new URLSearchParams([[s.name, s.value]]);
  case "multipart": { const f = new FormData(); f.append(s.name, s.value); return f; }
  default: return s.name + "=" + s.value; // sent as text/plain
  }
}

// A no-cors fetch: no preflight, and an opaque answer the page cannot read.
// A Content-Type it names that is not a simple one is dropped.
async function noCors(s) {
  const init = { method: s.method, mode: "no-cors", credentials: "include", cache: "no-store" };
  if (s.method === "POST") init.body = body(s);
  if (s.enc === "json") init.headers = { "Content-Type": "application/json" };
  try {
    const res = await fetch(s.url, init);
    return "answered, " + res.type;
  } catch (e) {
    return "rejected: " + e.name;
  }
}

// A CORS fetch that is not simple (a JSON body, or DELETE): the browser
// asks first (a preflight), and sends the request only if the server
// allows this origin.
async function cors(s) {
  const init = { method: s.method, credentials: "include" };
  if (s.method === "POST") {
    init.headers = { "Content-Type": "application/json" };
    init.body = body(s);
  }
  try {
    const res = await fetch(s.url, init);
    return "answered " + res.status + ": " + await res.text();
  } catch (e) {
    return "rejected: " + e.name;
  }
}

// A same-origin request that reads its answer (the rebound page): the
// status and the first chunk of the body, so that a stream the server
// accepted settles too.
async function read(s) {
  const init = { method: s.method, headers: {} };
  if (s.method === "POST") {
    init.headers["Content-Type"] = "application/json";
    init.body = body(s);
  }
  try {
    const res = await fetch(s.url, init);
    const reader = res.body.getReader();
    const { value } = await reader.read();
    reader.cancel();
    return "status " + res.status + ": " + new TextDecoder().decode(value);
  } catch (e) {
    return "rejected: " + e.name;
  }
}

function xhr(s) {
  return new Promise((resolve) => {
    const x = new XMLHttpRequest();
    x.open(s.method, s.url);
    x.setRequestHeader("Content-Type", "application/json");
    x.onload = () => resolve("status " + x.status + ": " + x.responseText);
    x.onerror = () => resolve("error");
    x.send(body(s));
  });
}

// A form posted into a frame of its own; it settles when the server's
// answer has loaded there (the frame then holds another origin's document).
function form(s, doc = document) {
  return new Promise((resolve) => {
    const frame = doc.createElement("iframe");
    frame.name = "form" + (++seq);
    doc.body.append(frame);
    frame.addEventListener("load", () => {
      if (frame.contentDocument === null) resolve("loaded");
    });
    const f = doc.createElement("form");
    f.method = s.method;
    f.action = s.url;
    f.enctype = s.enc;
    f.target = frame.name;
    const input = doc.createElement("input");
    input.type = "hidden";
    input.name = s.name;
    input.value = s.value;
    f.append(input);
    doc.body.append(f);
    f.submit();
  });
}

// The server's own page in a frame: if it ran, it would follow the session
// and draw consent. It settles when the frame has loaded.
function frame(s) {
  return new Promise((resolve) => {
    const f = document.createElement("iframe");
    f.addEventListener("load", () => resolve("loaded"), { once: true });
    f.src = s.url;
    document.body.append(f);
  });
}

function socket(s) {
  return new Promise((resolve) => {
    const seen = [];
    const ws = new WebSocket(s.url);
    ws.onopen = () => {
      seen.push("open");
      for (const m of s.send) ws.send(m);
      ws.close();
    };
    ws.onerror = () => seen.push("error");
    ws.onclose = (ev) => {
      seen.push("close " + ev.code);
      resolve(seen.join(", "));
    };
  });
}

// An EventSource: if it opened, it would stay open, holding its place
// among the session's clients.
function eventSource(s) {
  return new Promise((resolve) => {
    const es = new EventSource(s.url, { withCredentials: true });
    es.onopen = () => resolve("open");
    es.onerror = () => {
      const state = es.readyState;
      es.close();
      resolve("error, readyState " + state);
    };
  });
}

// inNullOrigin runs in a sandboxed frame, whose origin is opaque: its
// requests carry Origin: null. It posts its outcome to the page.
async function inNullOrigin(s) {
  const done = (outcome) => parent.postMessage({ id: s.id, outcome }, "*");
  if (s.kind === "null-fetch") {
    try {
      const res = await fetch(s.url, { method: "POST", mode: "no-cors", body: s.name + "=" + s.value });
      done("answered, " + res.type);
    } catch (e) {
      done("rejected: " + e.name);
    }
    return;
  }
  const frame = document.createElement("iframe");
  frame.name = "target";
  document.body.append(frame);
  frame.addEventListener("load", () => {
    if (frame.contentDocument === null) done("loaded");
  });
  const f = document.createElement("form");
  f.method = "POST";
  f.action = s.url;
  f.enctype = "text/plain";
  f.target = "target";
  const input = document.createElement("input");
  input.type = "hidden";
  input.name = s.name;
  input.value = s.value;
  f.append(input);
  document.body.append(f);
  f.submit();
}

function sandboxed(s) {
  return new Promise((resolve) => {
    const id = "null" + (++seq);
    addEventListener("message", function got(ev) {
      if (ev.data && ev.data.id === id) {
        removeEventListener("message", got);
        resolve(ev.data.outcome);
      }
    });
    const f = document.createElement("iframe");
    f.sandbox = "allow-scripts allow-forms";
    f.srcdoc = "<!doctype html><body><script>(" + inNullOrigin + ")(" + JSON.stringify({ ...s, id }) + ")<\/script>";
    document.body.append(f);
  });
}

const kinds = { fetch: noCors, cors, read, xhr, form, frame, ws: socket, es: eventSource, "null-fetch": sandboxed, "null-form": sandboxed };

(async () => {
  const results = {};
  for (const a of cfg.attacks) {
    results[a.name] = [];
    for (const s of a.steps) {
      let out;
      try {
        out = await kinds[s.kind](s);
      } catch (e) {
        out = "threw: " + e;
      }
      results[a.name].push(out);
    }
  }
  window.results = results;
  window.done = true;
})();
</script></body></html>
`

// step is one request of the attacker page. The exported fields are the
// page's; the others are what the server must see of it.
type step struct {
	// Kind is how the page sends it: fetch (no-cors), cors, read
	// (same-origin, reading the answer), xhr, form, frame, ws, es,
	// null-fetch or null-form (from a sandboxed frame).
	Kind   string   `json:"kind"`
	Method string   `json:"method,omitempty"`
	URL    string   `json:"url"`
	Enc    string   `json:"enc,omitempty"` // the body's encoding: text, json (text, naming JSON), urlencoded, multipart, or a form's enctype
	Name   string   `json:"name,omitempty"`
	Value  string   `json:"value,omitempty"` // the body is Name=Value
	Send   []string `json:"send,omitempty"`  // ws: the messages sent once open

	mark   string // the attack=… parameter of URL, which names it in the rig's log
	method string // the method the server must see
	status int    // the status the server must answer
	origin string // the Origin the server must see, or "" for any
}

// attack is one row of the table: the steps of one way in.
type attack struct {
	Name  string `json:"name"`
	Steps []step `json:"steps"`
}

// withBody returns s carrying body as a form field whose name is the body
// up to its first "=" and whose value is the rest: posted as text/plain,
// name=value is the body again.
func withBody(t *testing.T, s step, body string) step {
	t.Helper()
	name, value, ok := strings.Cut(body, "=")
	if !ok {
		t.Fatalf("payload %s has no \"=\" to split a form field at", body)
	}
	s.Name, s.Value = name, value
	return s
}

// payload is a request body that does harm when the kernel carries it out:
// a session the attacker chose, a command run, a session written to. canary
// is the file its command creates.
type payload struct {
	name, route, body, canary string
}

// payloads returns every payload of a row: a session whose agent is a
// command (as agent and as model), a prompt that runs a command in the
// existing session (over /control and over /run), a run that creates a
// session, and a chat completion whose model is a command. Each body's
// first "=" is inside a string, and each names mark-<payload> in it.
func payloads(target, canaries, row string) []payload {
	var out []payload
	add := func(name, route, format string, args ...any) {
		out = append(out, payload{name: name, route: route, body: fmt.Sprintf(format, args...), canary: filepath.Join(canaries, "pwned-"+row+"-"+name)})
	}
	touch := func(name string) string { return "touch " + filepath.Join(canaries, "pwned-"+row+"-"+name) }
	mark := func(name string) string { return "attack=" + row + "-" + name }
	add("agent", "/control", `{"t":"session.new","title":%s,"id":"1","agent":%s}`, js(mark("agent")), js("acp:sh -c '"+touch("agent")+"'"))
	add("model", "/control", `{"t":"session.new","title":%s,"id":"1","model":%s}`, js(mark("model")), js("acp:sh -c '"+touch("model")+"'"))
	add("send", "/control", `{"t":"run.send","id":"1","session":%s,"input":{"text":%s}}`, js(target), js("run `"+touch("send")+"` "+mark("send")))
	add("run", "/run", `{"threadId":%s,"runId":%s,"messages":[{"id":%s,"role":"user","content":%s}]}`,
		js(target), js("run-"+row), js("msg-"+row), js("run `"+touch("run")+"` "+mark("run")))
	add("run-new", "/run", `{"threadId":%s,"runId":%s,"messages":[{"id":%s,"role":"user","content":%s}]}`,
		js("thread-"+row), js("run-new-"+row), js("msg-new-"+row), js("run `"+touch("run-new")+"` "+mark("run-new")))
	add("chat", "/v1/chat/completions", `{"model":%s,"messages":[{"role":"user","content":%s}]}`, js("acp:sh -c '"+touch("chat")+"'"), js(mark("chat")))
	return out
}

func payloadNamed(ps []payload, name string) payload {
	for _, p := range ps {
		if p.name == name {
			return p
		}
	}
	panic("no payload " + name)
}

// marked returns route with the attack=mark parameter added.
func marked(base, route, mark string) string {
	sep := "?"
	if strings.Contains(route, "?") {
		sep = "&"
	}
	return base + route + sep + "attack=" + url.QueryEscape(mark)
}

// channel is a way of sending a body from another origin.
type channel struct {
	name, kind, enc string
	nullOrigin      bool
	method          string // what the server sees
}

var channels = []channel{
	{name: "fetch-text", kind: "fetch", enc: "text", method: "POST"},
	{name: "fetch-json-header", kind: "fetch", enc: "json", method: "POST"},
	{name: "fetch-urlencoded", kind: "fetch", enc: "urlencoded", method: "POST"},
	{name: "fetch-multipart", kind: "fetch", enc: "multipart", method: "POST"},
	{name: "form-text", kind: "form", enc: "text/plain", method: "POST"},
	{name: "form-urlencoded", kind: "form", enc: "application/x-www-form-urlencoded", method: "POST"},
	{name: "form-multipart", kind: "form", enc: "multipart/form-data", method: "POST"},
	{name: "null-fetch", kind: "null-fetch", enc: "text", nullOrigin: true, method: "POST"},
	{name: "null-form", kind: "null-form", enc: "text/plain", nullOrigin: true, method: "POST"},
	// A JSON body needs a preflight: only the OPTIONS reaches the server.
	{name: "cors-json", kind: "cors", enc: "text", method: "OPTIONS"},
}

// routes are every route of the server, each tried with a no-cors GET and
// POST. Only GET / (the page, which holds no session data) and GET
// /healthz answer a page on another site.
func routes(target string) []struct{ name, path string } {
	return []struct{ name, path string }{
		{"run", "/run"},
		{"events", "/events?session=" + url.QueryEscape(target) + "&client=web&draws=thread,tools,consent"},
		{"control", "/control"},
		{"ws", "/ws"},
		{"acp-ws", "/acp/ws?session=" + url.QueryEscape(target)},
		{"chat", "/v1/chat/completions"},
		{"models", "/v1/models"},
		{"live", "/api/live"},
		{"healthz", "/healthz"},
		{"root", "/"},
		{"auth", "/auth"},
	}
}

// crossOriginAttacks returns every attack of a page at origin on the
// server at base.
func crossOriginAttacks(t *testing.T, label, base, origin, target, canaries string) []attack {
	t.Helper()
	wsBase := "ws" + strings.TrimPrefix(base, "http")
	var out []attack
	// Simple requests and forms, each with every payload.
	for _, ch := range channels {
		row := label + "-" + ch.name
		a := attack{Name: row}
		for _, p := range payloads(target, canaries, row) {
			mark := row + "-" + p.name
			want := origin
			if ch.nullOrigin {
				want = "null"
			}
			s := step{Kind: ch.kind, Method: "POST", URL: marked(base, p.route, mark), Enc: ch.enc,
				mark: mark, method: ch.method, status: http.StatusForbidden, origin: want}
			a.Steps = append(a.Steps, withBody(t, s, p.body))
		}
		out = append(out, a)
	}
	// Every route, by no-cors GET and POST; a POST carries a payload of
	// its route (the last of each), or a session.new elsewhere.
	row := label + "-route"
	a := attack{Name: row}
	ps := payloads(target, canaries, row)
	bodies := map[string]payload{}
	for _, p := range ps {
		bodies[p.route] = p
	}
	for _, rt := range routes(target) {
		get := step{Kind: "fetch", Method: "GET", URL: marked(base, rt.path, row+"-get-"+rt.name),
			mark: row + "-get-" + rt.name, method: "GET", status: http.StatusForbidden}
		if rt.name == "root" || rt.name == "healthz" {
			get.status = http.StatusOK
		}
		body, ok := bodies[strings.SplitN(rt.path, "?", 2)[0]]
		if !ok {
			body = payloadNamed(ps, "agent")
		}
		post := step{Kind: "fetch", Method: "POST", URL: marked(base, rt.path, row+"-post-"+rt.name), Enc: "text",
			mark: row + "-post-" + rt.name, method: "POST", status: http.StatusForbidden, origin: origin}
		a.Steps = append(a.Steps, get, withBody(t, post, body.body))
	}
	// Signing the person out needs a preflight; the events stream with
	// consent, as an EventSource would follow it; and the server's own
	// page, framed, which would follow the session.
	a.Steps = append(a.Steps,
		step{Kind: "cors", Method: "DELETE", URL: marked(base, "/auth", row+"-delete-auth"),
			mark: row + "-delete-auth", method: "OPTIONS", status: http.StatusForbidden, origin: origin},
		step{Kind: "es", URL: marked(base, "/events?session="+url.QueryEscape(target)+"&client=web&draws=thread,tools,consent", row+"-es"),
			mark: row + "-es", method: "GET", status: http.StatusForbidden, origin: origin},
		step{Kind: "frame", URL: marked(base, "/", row+"-frame") + "#session=" + url.QueryEscape(target),
			mark: row + "-frame", method: "GET", status: http.StatusOK})
	out = append(out, a)
	// WebSockets: the request protocol, declaring consent, and the ori
	// relay's, answering permission.
	row = label + "-ws"
	ps = payloads(target, canaries, row)
	out = append(out, attack{Name: row, Steps: []step{
		{Kind: "ws", URL: marked(wsBase, "/ws", row+"-ws"), Send: []string{
			`{"t":"hello","id":"h","client":"web","draws":["thread","tools","consent"]}`,
			payloadNamed(ps, "agent").body,
			payloadNamed(ps, "send").body,
			fmt.Sprintf(`{"t":"consent.answer","id":"c","session":%s,"request":"consent-1","option":"allow_once"}`, js(target)),
		}, mark: row + "-ws", method: "GET", status: http.StatusForbidden, origin: origin},
		{Kind: "ws", URL: marked(wsBase, "/acp/ws?session="+url.QueryEscape(target), row+"-acp-ws"), Send: []string{
			fmt.Sprintf(`{"type":"prompt","text":%s}`, js("run `touch "+filepath.Join(canaries, "pwned-"+row+"-acp-ws")+"`")),
			`{"type":"permission_response","requestId":"consent-1","optionId":"allow_once"}`,
		}, mark: row + "-acp-ws", method: "GET", status: http.StatusForbidden, origin: origin},
	}})
	return out
}

// seenRequest is what the rig's server saw of one request.
type seenRequest struct {
	method, path, mark, host, origin, site, ctype string
	status                                        int
}

func (s seenRequest) String() string {
	return fmt.Sprintf("%s %s (attack=%s, Host %s, Origin %q, Sec-Fetch-Site %q, Content-Type %q) → %d",
		s.method, s.path, s.mark, s.host, s.origin, s.site, s.ctype, s.status)
}

// requestLog records every request the rig's server answered.
type requestLog struct {
	mu   sync.Mutex
	reqs []seenRequest // guarded by mu
}

func (l *requestLog) add(r *http.Request, status int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, seenRequest{method: r.Method, path: r.URL.Path, mark: r.URL.Query().Get("attack"), host: r.Host,
		origin: r.Header.Get("Origin"), site: r.Header.Get("Sec-Fetch-Site"), ctype: r.Header.Get("Content-Type"), status: status})
}

// since returns the requests after the first n.
func (l *requestLog) since(n int) []seenRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs[n:])
}

func (l *requestLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// attackerServer serves attacker pages at the paths they are put at.
type attackerServer struct {
	*httptest.Server
	mu    sync.Mutex
	pages map[string]string // guarded by mu
}

func newAttackerServer(t *testing.T) *attackerServer {
	a := &attackerServer{pages: map[string]string{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		page, ok := a.pages[r.URL.Path]
		a.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	}))
	t.Cleanup(a.Close)
	return a
}

// put serves at path a page that runs attacks.
func (a *attackerServer) put(path string, attacks []attack) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pages[path] = pageWith(attacks)
}

func pageWith(attacks []attack) string {
	cfg, _ := json.Marshal(map[string]any{"attacks": attacks})
	return strings.Replace(attackerPage, "/*cfg*/", string(cfg), 1)
}

// runAttacks opens the page at pageURL, waits until it has made every
// request and every one has settled, and returns what it saw of each step.
func runAttacks(t *testing.T, ctx context.Context, pageURL string) map[string][]string {
	t.Helper()
	run(t, ctx, "open the attacker page", chromedp.Navigate(pageURL))
	cctx, cancel := context.WithTimeout(ctx, 4*waitFor)
	defer cancel()
	if _, err := chromedp.Run(cctx, chromedp.Poll[bool]("window.done === true", chromedp.WithPollingTimeout(3*waitFor))); err != nil {
		t.Fatalf("wait until the attacker page has finished: %v", err)
	}
	return evalJS[map[string][]string](t, ctx, "window.results")
}

// kernelState is what an attack must not change.
type kernelState struct {
	sessions []string
	head     uint64 // of the existing session
}

func stateOf(t *testing.T, r *rig, target string) kernelState {
	t.Helper()
	ctx := context.Background()
	list, err := r.k.Sessions(ctx)
	if err != nil {
		t.Fatalf("Sessions() = %v", err)
	}
	var st kernelState
	for _, s := range list {
		st.sessions = append(st.sessions, s.ID)
	}
	slices.Sort(st.sessions)
	sess, err := r.k.Session(ctx, target)
	if err != nil {
		t.Fatalf("Session(%s) = %v", target, err)
	}
	st.head = sess.Head()
	return st
}

// checkUnchanged fails unless the kernel is as it was and no canary exists.
func checkUnchanged(t *testing.T, r *rig, target, canaries string, before kernelState) {
	t.Helper()
	after := stateOf(t, r, target)
	if !slices.Equal(after.sessions, before.sessions) {
		t.Errorf("sessions = %v, want them unchanged: %v", after.sessions, before.sessions)
	}
	if after.head != before.head {
		t.Errorf("head of the existing session %s = %d, want it unchanged at %d: something was written to it", target, after.head, before.head)
	}
	files, err := os.ReadDir(canaries)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Errorf("canary %s exists: an attack ran a command", f.Name())
	}
}

// checkSteps fails unless the server received every step of attacks and
// answered each as the step says, and no request came to it that no step
// made (the server's own page, framed, would make some).
func checkSteps(t *testing.T, log *requestLog, from int, attacks []attack, results map[string][]string) {
	t.Helper()
	seen := log.since(from)
	byMark := map[string][]seenRequest{}
	for _, s := range seen {
		if s.mark == "" {
			t.Errorf("the server received %s, which no attack made: did the framed page run?", s)
			continue
		}
		byMark[s.mark] = append(byMark[s.mark], s)
	}
	for _, a := range attacks {
		t.Run(a.Name, func(t *testing.T) {
			outcomes := results[a.Name]
			if len(outcomes) != len(a.Steps) {
				t.Fatalf("the page reported %d outcomes, want %d: %v", len(outcomes), len(a.Steps), outcomes)
			}
			for i, s := range a.Steps {
				out := outcomes[i]
				switch {
				case s.Kind == "ws" && strings.Contains(out, "open"):
					t.Errorf("%s: the WebSocket opened (%s), want it refused", s.mark, out)
				case s.Kind == "es" && out == "open":
					t.Errorf("%s: the event stream opened, want it refused", s.mark)
				case s.Kind == "cors" && !strings.HasPrefix(out, "rejected"):
					t.Errorf("%s: the CORS request was answered (%s), want the preflight refused", s.mark, out)
				}
				got := byMark[s.mark]
				if len(got) == 0 {
					t.Errorf("%s %s: the server never received it (the page saw %q), want it received and refused", s.Kind, s.mark, out)
				}
				for _, g := range got {
					if g.method != s.method || g.status != s.status || (s.origin != "" && g.origin != s.origin) {
						t.Errorf("%s: the server saw %s, want %s answered %d from Origin %q (the page saw %q)", s.mark, g, s.method, s.status, s.origin, out)
					}
				}
			}
		})
	}
}

// watchRun follows sess from since until runID ends (any run, when runID
// is ""), or until a consent question is asked, and returns the frames and
// the question's request. To follow a run past its question, watch again
// from the head it returned at.
func watchRun(t *testing.T, sess *kernel.Session, since uint64, runID string) (frames []kernel.Frame, asked string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	sub, err := sess.Subscribe(ctx, &since)
	if err != nil {
		t.Fatalf("Subscribe() = %v", err)
	}
	defer sub.Close()
	done := false
	take := func(f kernel.Frame) {
		f.Data = slices.Clone(f.Data)
		frames = append(frames, f)
		if (f.Type == "RUN_FINISHED" || f.Type == "RUN_ERROR") && (runID == "" || f.Run == runID) {
			done = true
		}
		if f.Type == "CUSTOM" {
			var ev struct {
				Name  string `json:"name"`
				Value struct {
					Request string `json:"request"`
				} `json:"value"`
			}
			if json.Unmarshal(f.Data, &ev) == nil && ev.Name == kernel.ConsentRequestedEvent {
				asked, done = ev.Value.Request, true
			}
		}
	}
	if err := sub.Backlog(ctx, func(f kernel.Frame) error { take(f); return nil }); err != nil {
		t.Fatalf("Backlog() = %v", err)
	}
	var batch []kernel.Frame
	for !done {
		select {
		case <-sub.Ready():
		case <-sub.Done():
			t.Fatalf("the subscription ended before the run did: %v", sub.Err())
		case <-ctx.Done():
			t.Fatalf("run %q of %s did not end: %v; frames so far: %d", runID, sess.ID(), ctx.Err(), len(frames))
		}
		batch = sub.Take(batch[:0])
		for _, f := range batch {
			if !done {
				take(f)
			}
		}
	}
	return frames, asked
}

// send starts a run in sess as the person would and returns its id and the
// head it started after.
func send(t *testing.T, sess *kernel.Session, text string) (runID string, since uint64) {
	t.Helper()
	since = sess.Head()
	res, err := sess.Send(context.Background(), kernel.SendInput{Text: text})
	if err != nil {
		t.Fatalf("Send(%q) = %v", text, err)
	}
	return res.RunID, since
}

// existingSession creates the person's session, with one exchange in it.
func existingSession(t *testing.T, r *rig) string {
	t.Helper()
	sess, err := r.k.CreateSession(context.Background(), kernel.SessionOptions{Title: "the person's session"})
	if err != nil {
		t.Fatalf("CreateSession() = %v", err)
	}
	runID, since := send(t, sess, "hello")
	watchRun(t, sess, since, runID)
	return sess.ID()
}

// checkNoConsenter shows that no client that draws consent is attached to
// target: a call that needs consent is denied at once because nobody can
// be asked. The command would create a canary.
func checkNoConsenter(t *testing.T, r *rig, target, canary string) {
	t.Helper()
	sess, err := r.k.Session(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	runID, since := send(t, sess, "run `mkdir "+canary+"`")
	frames, asked := watchRun(t, sess, since, runID)
	if asked != "" {
		t.Errorf("a consent question was put to a client attached to %s, want none attached: the attacker page attached one", target)
		after := sess.Head()
		if err := sess.AnswerConsent(context.Background(), kernel.Caller{Client: "test", Draws: []string{"thread", "tools", "consent"}}, asked, "deny"); err != nil {
			t.Fatal(err)
		}
		watchRun(t, sess, after, runID)
	} else if !slices.ContainsFunc(frames, func(f kernel.Frame) bool {
		return strings.Contains(string(f.Data), "no client that can ask one is attached")
	}) {
		t.Errorf("the shell call that needs consent was not denied for want of a client that draws consent; frames: %d", len(frames))
	}
	if _, err := os.Stat(canary); err == nil {
		t.Errorf("canary %s exists: the call that needed consent ran", canary)
	}
}

// sentWith reports whether the rig recorded a JSON body of POST /control
// that holds text.
func sentWith(r *rig, text string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.controls {
		b, _ := json.Marshal(m)
		if strings.Contains(string(b), text) {
			return true
		}
	}
	return false
}

func canaryDir(t *testing.T, r *rig) string {
	t.Helper()
	dir := filepath.Join(r.workspace, "canaries")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAttackPayloadsWorkFromAProgram shows that the attacks' payloads do
// harm when they reach the armed rig's kernel: sent by a program on this
// machine (which the boundary trusts) as JSON, each creates its canary.
// They are sent with the CRLF a text/plain form adds.
func TestAttackPayloadsWorkFromAProgram(t *testing.T) {
	r := newRig(t, rigOptions{armed: true})
	canaries := canaryDir(t, r)
	target := existingSession(t, r)
	ctx := context.Background()
	for _, p := range payloads(target, canaries, "program") {
		t.Run(p.name, func(t *testing.T) {
			body := p.body + "\r\n"
			switch p.route {
			case "/control":
				v, status := control(t, r.http.URL, "", body)
				if status != http.StatusOK {
					t.Fatalf("POST /control %s = %d %v, want 200", body, status, v)
				}
				session := target
				if id, ok := v["session"].(string); ok {
					// A new session: a prompt starts its agent.
					session = id
					v, status = control(t, r.http.URL, "", fmt.Sprintf(`{"t":"run.send","id":"2","session":%s,"input":{"text":"go"}}`, js(id)))
					if status != http.StatusOK {
						t.Fatalf("run.send = %d %v, want 200", status, v)
					}
				}
				sess, err := r.k.Session(ctx, session)
				if err != nil {
					t.Fatal(err)
				}
				watchRun(t, sess, 0, v["runId"].(string))
			default:
				res, err := http.Post(r.http.URL+p.route, "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, res.Body) // the answer ends with the run
				res.Body.Close()
			}
			if _, err := os.Stat(p.canary); err != nil {
				t.Errorf("%s %s: canary %v, want the payload to have run its command", p.route, p.body, err)
			}
		})
	}
}

// TestAttackerPageCannotCrossTheBoundary runs every attack from a page of
// another origin of the same site (127.0.0.1 on another port) and from a
// page of another site (attacker.test).
func TestAttackerPageCannotCrossTheBoundary(t *testing.T) {
	log := &requestLog{}
	r := newRig(t, rigOptions{armed: true, seen: log.add})
	canaries := canaryDir(t, r)
	target := existingSession(t, r)
	attacker := newAttackerServer(t)
	_, port, _ := net.SplitHostPort(attacker.Listener.Addr().String())
	ctx := browser(t, 1280, 800, chromedp.Flag("host-resolver-rules", "MAP attacker.test 127.0.0.1"))

	for _, leg := range []struct{ label, origin, site string }{
		{"same-site", attacker.URL, "same-site"},
		{"cross-site", "http://attacker.test:" + port, "cross-site"},
	} {
		t.Run(leg.label, func(t *testing.T) {
			attacks := crossOriginAttacks(t, leg.label, r.http.URL, leg.origin, target, canaries)
			attacker.put("/"+leg.label, attacks)
			before := stateOf(t, r, target)
			from := log.len()
			results := runAttacks(t, ctx, leg.origin+"/"+leg.label)

			checkSteps(t, log, from, attacks, results)
			if !slices.ContainsFunc(log.since(from), func(s seenRequest) bool { return s.site == leg.site }) {
				t.Errorf("no request said Sec-Fetch-Site: %s, want the page's requests to be %s", leg.site, leg.site)
			}
			// The bodies that are JSON reached the server whole.
			for _, ch := range []string{"fetch-text", "fetch-json-header", "form-text", "null-fetch", "null-form"} {
				for _, p := range []string{"agent", "model", "send"} {
					if mark := "attack=" + leg.label + "-" + ch + "-" + p; !sentWith(r, mark) {
						t.Errorf("the rig recorded no JSON body of POST /control holding %s, want the whole body received", mark)
					}
				}
			}
			checkUnchanged(t, r, target, canaries, before)
			// While the attacker page is still open, with every frame it
			// made: no consenting client is attached.
			checkNoConsenter(t, r, target, filepath.Join(canaries, "pwned-probe-"+leg.label))
		})
	}
}

// follow attaches the person's own client to session: a program on this
// machine following it over GET /events and drawing consent. It returns
// once the stream has begun.
func follow(t *testing.T, r *rig, session string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.http.URL+"/events?session="+url.QueryEscape(session)+"&client=tui&draws=thread,tools,consent", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET /events: %v", err)
	}
	if res.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("GET /events from a program = %d, want 200", res.StatusCode)
	}
	lines := bufio.NewScanner(res.Body)
	lines.Buffer(nil, 1<<20)
	for lines.Scan() && !strings.HasPrefix(lines.Text(), "data:") {
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for lines.Scan() {
		}
	}()
	t.Cleanup(func() {
		cancel()
		res.Body.Close()
		<-drained
	})
}

// forgeryAttacks returns the attacks of a page at origin that answer the
// pending consent request with allow_once.
func forgeryAttacks(t *testing.T, label, base, origin, target, request string) []attack {
	t.Helper()
	wsBase := "ws" + strings.TrimPrefix(base, "http")
	row := label + "-forge"
	answer := func(mark string) string {
		return fmt.Sprintf(`{"t":"consent.answer","id":%s,"session":%s,"request":%s,"option":"allow_once"}`, js("attack="+mark), js(target), js(request))
	}
	query := "/control?client=web&draws=thread,tools,consent"
	var steps []step
	for _, ch := range channels {
		mark := row + "-" + ch.name
		want := origin
		if ch.nullOrigin {
			want = "null"
		}
		s := step{Kind: ch.kind, Method: "POST", URL: marked(base, query, mark), Enc: ch.enc,
			mark: mark, method: ch.method, status: http.StatusForbidden, origin: want}
		steps = append(steps, withBody(t, s, answer(mark)))
	}
	steps = append(steps,
		step{Kind: "ws", URL: marked(wsBase, "/ws", row+"-ws"), Send: []string{
			`{"t":"hello","id":"h","client":"web","draws":["thread","tools","consent"]}`,
			answer(row + "-ws"),
		}, mark: row + "-ws", method: "GET", status: http.StatusForbidden, origin: origin},
		step{Kind: "ws", URL: marked(wsBase, "/acp/ws?session="+url.QueryEscape(target), row+"-acp-ws"), Send: []string{
			fmt.Sprintf(`{"type":"permission_response","requestId":%s,"optionId":"allow_once"}`, js(request)),
		}, mark: row + "-acp-ws", method: "GET", status: http.StatusForbidden, origin: origin})
	return []attack{{Name: row, Steps: steps}}
}

// TestAttackerPageCannotAnswerConsent puts a real consent question in the
// person's session, with the person's own client attached, and has pages
// of another origin and another site answer it allow_once every way they
// can. The question stays pending, and the command does not run; then the
// person denies it.
func TestAttackerPageCannotAnswerConsent(t *testing.T) {
	log := &requestLog{}
	r := newRig(t, rigOptions{armed: true, seen: log.add})
	canaries := canaryDir(t, r)
	target := existingSession(t, r)
	follow(t, r, target)
	sess, err := r.k.Session(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	canary := filepath.Join(canaries, "pwned-consent")
	runID, since := send(t, sess, "run `mkdir "+canary+"`")
	_, request := watchRun(t, sess, since, runID)
	if request == "" {
		t.Fatal("the run ended without asking consent for mkdir, want a question pending")
	}
	pending := sess.Head() // the question is out; its answer comes after

	attacker := newAttackerServer(t)
	_, port, _ := net.SplitHostPort(attacker.Listener.Addr().String())
	ctx := browser(t, 1280, 800, chromedp.Flag("host-resolver-rules", "MAP attacker.test 127.0.0.1"))
	for _, leg := range []struct{ label, origin string }{
		{"same-site", attacker.URL},
		{"cross-site", "http://attacker.test:" + port},
	} {
		t.Run(leg.label, func(t *testing.T) {
			attacks := forgeryAttacks(t, leg.label, r.http.URL, leg.origin, target, request)
			attacker.put("/"+leg.label, attacks)
			before := stateOf(t, r, target)
			from := log.len()
			results := runAttacks(t, ctx, leg.origin+"/"+leg.label)
			checkSteps(t, log, from, attacks, results)
			// Nothing written: no orrery.consent.resolved, no tool output.
			checkUnchanged(t, r, target, canaries, before)
			if !sess.Running() {
				t.Error("the run is no longer in flight, want it waiting for the person's answer")
			}
		})
	}

	// The person denies; the answer is taken, so the question was still
	// pending.
	v, status := control(t, r.http.URL, "?client=tui&draws=thread,tools,consent",
		fmt.Sprintf(`{"t":"consent.answer","id":"x","session":%s,"request":%s,"option":"deny"}`, js(target), js(request)))
	if status != http.StatusOK {
		t.Fatalf("the person's consent.answer deny = %d %v, want 200: the question should still be pending", status, v)
	}
	frames, _ := watchRun(t, sess, pending, runID)
	var resolved []string
	for _, f := range frames {
		if strings.Contains(string(f.Data), kernel.ConsentResolvedEvent) {
			resolved = append(resolved, string(f.Data))
		}
	}
	if len(resolved) != 1 || !strings.Contains(resolved[0], `"outcome":"denied"`) || !strings.Contains(resolved[0], `"client":"tui"`) {
		t.Errorf("consent resolutions = %v, want one: denied by tui", resolved)
	}
	if _, err := os.Stat(canary); err == nil {
		t.Errorf("canary %s exists: the command that waited for consent ran", canary)
	}
}

// rebindingProxy is the HTTP proxy Chromium is started with. It plays the
// DNS of a rebinding attack on host (rebind.test:<the server's port>): the
// first GET / is the attacker's page, and from then on every request for
// host, and every CONNECT tunnel to it (how Chromium sends a WebSocket
// through a proxy), goes to the server at addr, with the Host header the
// browser sent. To the browser it is one origin throughout.
type rebindingProxy struct {
	*httptest.Server
	rebound atomic.Bool

	mu      sync.Mutex
	tunnels []net.Conn // guarded by mu
	wg      sync.WaitGroup
}

func newRebindingProxy(t *testing.T, host, page, addr string) *rebindingProxy {
	p := &rebindingProxy{}
	forward := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(&url.URL{Scheme: "http", Host: addr})
		pr.Out.Host = pr.In.Host // as a browser whose DNS was rebound sends it
	}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Host != host:
			http.Error(w, "this proxy serves only "+host, http.StatusBadGateway)
		case r.Method == http.MethodConnect:
			p.tunnel(w, addr)
		case !p.rebound.Load() && r.URL.Path == "/":
			p.rebound.Store(true)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, page)
		default:
			forward.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(func() {
		p.Close()
		p.mu.Lock()
		for _, c := range p.tunnels {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// tunnel joins the browser's connection to one to addr.
func (p *rebindingProxy) tunnel(w http.ResponseWriter, addr string) {
	up, err := net.Dial("tcp", addr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	down, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		return
	}
	p.mu.Lock()
	p.tunnels = append(p.tunnels, up, down)
	p.wg.Add(2)
	p.mu.Unlock()
	io.WriteString(down, "HTTP/1.1 200 Connection Established\r\n\r\n")
	go func() {
		defer p.wg.Done()
		io.Copy(up, buf)
		up.Close()
	}()
	go func() {
		defer p.wg.Done()
		io.Copy(down, up)
		down.Close()
	}()
}

// TestRebindingThroughAProxy simulates DNS rebinding: the attacker's page
// is served as http://rebind.test:<the server's port>/, and then the name
// points at the server. The page's requests are same-origin, so it reads
// every answer: each is 403, because the server does not answer to that
// name, and nothing changes.
func TestRebindingThroughAProxy(t *testing.T) {
	log := &requestLog{}
	r := newRig(t, rigOptions{armed: true, seen: log.add})
	canaries := canaryDir(t, r)
	target := existingSession(t, r)
	addr := r.http.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	host := "rebind.test:" + port

	row := "rebind"
	var steps []step
	for _, p := range payloads(target, canaries, row) {
		mark := row + "-" + p.name
		steps = append(steps, withBody(t, step{Kind: "read", Method: "POST", URL: marked("", p.route, mark),
			mark: mark, method: "POST", status: http.StatusForbidden, origin: "http://" + host}, p.body))
	}
	xhr := withBody(t, step{Kind: "xhr", Method: "POST", URL: marked("", "/control", row+"-xhr"),
		mark: row + "-xhr", method: "POST", status: http.StatusForbidden}, payloadNamed(payloads(target, canaries, row+"-xhr"), "agent").body)
	steps = append(steps, xhr)
	for _, rt := range routes(target) {
		steps = append(steps, step{Kind: "read", Method: "GET", URL: marked("", rt.path, row+"-get-"+rt.name),
			mark: row + "-get-" + rt.name, method: "GET", status: http.StatusForbidden})
	}
	for _, read := range []struct{ name, body string }{
		{"list", `{"t":"session.list","id":"attack=list"}`},
		{"read", fmt.Sprintf(`{"t":"session.read","id":"attack=read","session":%s}`, js(target))},
	} {
		steps = append(steps, withBody(t, step{Kind: "read", Method: "POST", URL: marked("", "/control", row+"-"+read.name),
			mark: row + "-" + read.name, method: "POST", status: http.StatusForbidden}, read.body))
	}
	steps = append(steps, step{Kind: "ws", URL: marked("ws://"+host, "/ws", row+"-ws"), Send: []string{
		`{"t":"hello","id":"h","client":"web","draws":["thread","tools","consent"]}`,
		payloadNamed(payloads(target, canaries, row+"-ws"), "agent").body,
	}, mark: row + "-ws", method: "GET", status: http.StatusForbidden, origin: "http://" + host})
	attacks := []attack{{Name: row, Steps: steps}}

	proxy := newRebindingProxy(t, host, pageWith(attacks), addr)
	ctx := browser(t, 1280, 800, chromedp.ProxyServer(proxy.URL))
	before := stateOf(t, r, target)
	from := log.len()
	results := runAttacks(t, ctx, "http://"+host+"/")

	checkSteps(t, log, from, attacks, results)
	for i, s := range steps {
		out := results[row][i]
		if s.Kind != "read" && s.Kind != "xhr" {
			continue
		}
		if !strings.HasPrefix(out, "status 403: ") || !strings.Contains(out, `does not answer to the name \"rebind.test\"`) {
			t.Errorf("%s: the rebound page read %q, want 403 saying the server does not answer to rebind.test", s.mark, out)
		}
	}
	for _, s := range log.since(from) {
		if s.host != host {
			t.Errorf("the server saw %s, want every request to name %s", s, host)
		}
	}
	checkUnchanged(t, r, target, canaries, before)
}
