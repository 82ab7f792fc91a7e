package web_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// typeInPrompt focuses the prompt and types text key by key, as a person
// does, so the page sees every input event.
func typeInPrompt(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	run(t, ctx, "type "+text, chromedp.Focus(chromedp.ID("prompt")), chromedp.KeyEvent(text))
}

// clearPrompt empties the prompt.
func clearPrompt(t *testing.T, ctx context.Context) {
	t.Helper()
	_ = evalJS[bool](t, ctx, `(document.getElementById("prompt").value = "", true)`)
}

// pickerLabels returns the labels of the composer's completion list.
func pickerLabels(t *testing.T, ctx context.Context) string {
	t.Helper()
	return textOf(t, ctx, "#hints [role=option] code")
}

// userMessages returns the content of every orrery.user.message in the
// session's log.
func userMessages(t *testing.T, r *rig, session string) []kernel.UserMessage {
	t.Helper()
	sess, err := r.k.Session(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	frames, _, err := sess.Read(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []kernel.UserMessage
	for _, f := range frames {
		ev, err := protocol.DecodeEvent(f.Data)
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := ev.(*protocol.Custom); ok && c.Name == kernel.UserMessageEvent {
			var m kernel.UserMessage
			if err := json.Unmarshal(c.Value, &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
	}
	return out
}

func TestMentionAttachesWorkspaceFile(t *testing.T) {
	r := newRig(t, rigOptions{})
	for p, content := range map[string]string{"notebook.md": "# n\n", "src/notes.go": "package src\n", "node_modules/x/notes.js": "x\n"} {
		full := filepath.Join(r.workspace, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := browser(t, 1280, 800)
	session := openNewSession(t, ctx, r.http.URL)

	typeInPrompt(t, ctx, "summarize @note")
	until(t, ctx, "the @ picker lists the matching files", `document.querySelectorAll("#hints [role=option]").length === 3 && !document.getElementById("hints").hidden`)
	if got, want := pickerLabels(t, ctx), "@notes.txt\n@notebook.md\n@src/notes.go"; got != want {
		t.Errorf("the @ picker = %q, want %q (base names first, shorter first, node_modules skipped)", got, want)
	}
	screenshot(t, ctx, "mention-picker", "the composer's @ picker listing the workspace files that match note")
	// ↓ to the second, ↑ back to the first, Tab to take it.
	run(t, ctx, "choose notes.txt", chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.ArrowUp), chromedp.KeyEvent("\t"))
	if got := evalJS[string](t, ctx, `document.getElementById("prompt").value`); got != "summarize @notes.txt " {
		t.Errorf("the prompt after choosing = %q, want %q", got, "summarize @notes.txt ")
	}
	run(t, ctx, "send it", enterKey())
	until(t, ctx, "the answer has streamed in", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent.includes("to talk to a real model."))`)

	sends := r.sent("run.send")
	if len(sends) != 1 {
		t.Fatalf("run.send requests = %d, want 1", len(sends))
	}
	atts, _ := json.Marshal(sends[0]["input"].(map[string]any)["attachments"])
	if want := `[{"source":{"type":"path","value":"notes.txt"},"type":"document"}]`; string(atts) != want {
		t.Errorf("run.send attachments = %s, want %s", atts, want)
	}
	// The kernel read the file into the message, as the TUI sends it.
	msgs := userMessages(t, r, session)
	if len(msgs) != 1 || len(msgs[0].Content.Parts) != 2 || msgs[0].Content.Parts[1].Text != "File @notes.txt:\napples\n" {
		t.Errorf("the logged user message = %+v, want the prompt then the text part \"File @notes.txt:\\napples\\n\"", msgs)
	}
	// The model saw it: the offline model quotes what it was given.
	if got := textOf(t, ctx, ".msg.assistant .body"); !strings.Contains(got, `File @notes.txt:\napples`) {
		t.Errorf("the answer = %q, want the model to have been given the file", got)
	}
	if got := textOf(t, ctx, ".msg.user .body"); got != "summarize @notes.txt " {
		t.Errorf("the person's message = %q, want the prompt alone", got)
	}
	if got := textOf(t, ctx, ".msg.user .attachment summary"); got != "Attached notes.txt" {
		t.Errorf("the attachment line = %q, want Attached notes.txt", got)
	}
	if got := textOf(t, ctx, ".msg.user .attachment pre"); got != "apples\n" {
		t.Errorf("the attachment's text = %q, want apples", got)
	}
	screenshot(t, ctx, "mention-sent", "the prompt with notes.txt attached, and the offline model quoting the file it was given")

	// A file the picker never offered is refused by the kernel, with the fix.
	v, status := control(t, r.http.URL, "", `{"t":"run.send","id":"x","session":"`+session+`","input":{"text":"x","attachments":[{"type":"document","source":{"type":"path","value":"../etc/passwd"}}]}}`)
	if status != 400 || !strings.Contains(v["error"].(string), "outside the workspace") {
		t.Errorf("run.send with ../etc/passwd = %d %v, want 400 naming the workspace", status, v)
	}
}

// markedLabels returns the labels of the composer's completion list with
// each highlighted run in brackets: "@[s]e[rv]er/[con]n.go".
func markedLabels(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return evalJS[[]string](t, ctx, `[...document.querySelectorAll("#hints [role=option] code")].map(c =>
		[...c.childNodes].map(n => n.nodeName === "MARK" ? "[" + n.textContent + "]" : n.nodeType === 3 ? n.textContent : "<" + n.nodeName + ">").join(""))`)
}

func TestMentionMatchesFuzzily(t *testing.T) {
	r := newRig(t, rigOptions{})
	// A file name is text, not markup: this one must show as written.
	const tricky = `<img src=x onerror="window.pwned=1">conn.md`
	for _, p := range []string{"server/conn.go", "server/control.go", "client/connect.go", tricky} {
		full := filepath.Join(r.workspace, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("package x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := browser(t, 1280, 800)
	openNewSession(t, ctx, r.http.URL)

	typeInPrompt(t, ctx, "look at @conn")
	until(t, ctx, "the @ picker lists the fuzzy matches", `document.querySelectorAll("#hints [role=option]").length === 3`)
	want := []string{"@server/[conn].go", "@client/[conn]ect.go", "@" + tricky[:len(tricky)-7] + "[conn].md"}
	if got := markedLabels(t, ctx); !slices.Equal(got, want) {
		t.Errorf("the @ picker for @conn = %q, want %q", got, want)
	}
	if evalJS[bool](t, ctx, `!!document.querySelector("#hints img") || window.pwned === 1`) {
		t.Errorf("a file name's markup was drawn as HTML in the @ picker")
	}
	screenshot(t, ctx, "mention-fuzzy", "the @ picker matching conn fuzzily, the matched characters underlined")

	// Characters spread over the path still match, the best first.
	clearPrompt(t, ctx)
	typeInPrompt(t, ctx, "look at @srvcon")
	until(t, ctx, "the @ picker lists the matches of srvcon", `document.querySelectorAll("#hints [role=option]").length === 2 && document.querySelector("#hints [role=option] code").textContent === "@server/conn.go"`)
	if got, want := markedLabels(t, ctx), []string{"@[s]e[rv]er/[con]n.go", "@[s]e[rv]er/[con]trol.go"}; !slices.Equal(got, want) {
		t.Errorf("the @ picker for @srvcon = %q, want %q", got, want)
	}
	// ↓ to the second, Tab to take it, Enter to send.
	run(t, ctx, "choose server/control.go", chromedp.KeyEvent(kb.ArrowDown))
	if got := evalJS[string](t, ctx, `document.getElementById("prompt").getAttribute("aria-activedescendant") + " " + document.querySelector("#hints [aria-selected=true] code").textContent`); got != "hint-1 @server/control.go" {
		t.Errorf("the active option after ↓ = %q, want hint-1 @server/control.go", got)
	}
	run(t, ctx, "take it", chromedp.KeyEvent("\t"))
	if got := evalJS[string](t, ctx, `document.getElementById("prompt").value`); got != "look at @server/control.go " {
		t.Errorf("the prompt after choosing = %q, want %q", got, "look at @server/control.go ")
	}
	run(t, ctx, "send it", enterKey())
	until(t, ctx, "the answer has streamed in", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent.includes("to talk to a real model."))`)
	sends := r.sent("run.send")
	if len(sends) != 1 {
		t.Fatalf("run.send requests = %d, want 1", len(sends))
	}
	atts, _ := json.Marshal(sends[0]["input"].(map[string]any)["attachments"])
	if want := `[{"source":{"type":"path","value":"server/control.go"},"type":"document"}]`; string(atts) != want {
		t.Errorf("run.send attachments = %s, want %s", atts, want)
	}
	// The picker asked with a query, not a prefix.
	for _, q := range r.sent("workspace.files") {
		if _, ok := q["prefix"]; ok || q["query"] == nil {
			t.Errorf("workspace.files request = %v, want a query and no prefix", q)
		}
	}
}

func TestAgentCommandsInSlashPicker(t *testing.T) {
	r := newRig(t, rigOptions{acp: true})
	ctx := browser(t, 1280, 800)
	run(t, ctx, "load the page", chromedp.Navigate(r.http.URL+"/"), chromedp.WaitVisible(chromedp.ID("new-session")))
	v, status := control(t, r.http.URL, "", `{"t":"session.new","id":"n","model":"acp:test"}`)
	if status != 200 {
		t.Fatalf("session.new acp:test = %d %v", status, v)
	}
	session := v["session"].(string)
	run(t, ctx, "open the ACP session", chromedp.Navigate(r.http.URL+"/#session="+session))
	until(t, ctx, "the session is live", `document.getElementById("conn").dataset.state === "live" && window.orrery.view.session === `+js(session))

	// Before the agent has advertised anything, / offers the client's own.
	typeInPrompt(t, ctx, "/")
	until(t, ctx, "the / picker is open", `document.querySelectorAll("#hints [role=option]").length > 0`)
	if got := pickerLabels(t, ctx); strings.Contains(got, "/test") || !strings.Contains(got, "/stop") {
		t.Errorf("the / picker before the agent's commands = %q, want the client's own only", got)
	}
	run(t, ctx, "close the picker", chromedp.KeyEvent(kb.Escape))
	clearPrompt(t, ctx)

	// The agent's first turn delivers its available_commands_update.
	typeInPrompt(t, ctx, "text please")
	run(t, ctx, "send", enterKey())
	until(t, ctx, "the agent answered", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent.includes("Hello, world."))`)
	until(t, ctx, "the commands have arrived", `window.orrery.view.commands.some(c => c.name === "test")`)

	typeInPrompt(t, ctx, "/te")
	until(t, ctx, "the / picker offers the agent's command", `[...document.querySelectorAll("#hints [role=option]")].some(o => o.textContent.includes("/test"))`)
	got := textOf(t, ctx, "#hints [role=option]")
	if !strings.Contains(got, "/test Run the tests") || !strings.Contains(got, "agent") {
		t.Errorf("the / picker = %q, want /test with its description, marked agent", got)
	}
	screenshot(t, ctx, "agent-commands", "the / picker offering the ACP agent's /test command")
	run(t, ctx, "take it and send it", chromedp.KeyEvent("\t"), enterKey())
	until(t, ctx, "the agent got /test as its prompt", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent.includes("unknown scenario /test"))`)
	sends := r.sent("run.send")
	if len(sends) != 2 || sends[1]["input"].(map[string]any)["text"] != "/test" {
		t.Errorf("run.send requests = %v, want the second with text /test", sends)
	}
	// Both lists stay offered: the client's own /stop beside the agent's.
	clearPrompt(t, ctx)
	typeInPrompt(t, ctx, "/")
	until(t, ctx, "the / picker is open", `document.querySelectorAll("#hints [role=option]").length > 0`)
	if got := pickerLabels(t, ctx); !strings.Contains(got, "/test") || !strings.Contains(got, "/stop") || !strings.Contains(got, "/ui move") {
		t.Errorf("the / picker = %q, want the agent's /test beside the client's own", got)
	}
}
