package web_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// sessionEntry is a JavaScript expression: the session list's button for
// session id, or undefined.
func sessionEntry(id string) string {
	return fmt.Sprintf(`[...document.querySelectorAll("#sessions .session")].find(b => b.dataset.session === %s)`, js(id))
}

// TestSessionListIsLive shows the session list following GET /api/live:
// sessions another client creates and runs appear with their title,
// running state and cost as they change, with no session.list polling;
// after the stream drops, the reconnect's snapshot restores what changed
// meanwhile.
func TestSessionListIsLive(t *testing.T) {
	r := newRig(t, rigOptions{acp: true})
	ctx := browser(t, 1280, 800)
	run(t, ctx, "load the page", chromedp.Navigate(r.http.URL+"/"), chromedp.WaitVisible(chromedp.ID("new-session")))
	until(t, ctx, "the list is live", `document.getElementById("sessions-state").dataset.state === "live"`)

	// created
	v, status := control(t, r.http.URL, "", `{"t":"session.new","id":"n","model":"acp:test"}`)
	if status != 200 {
		t.Fatalf("session.new = %d %v", status, v)
	}
	id := v["session"].(string)
	until(t, ctx, "the new session is listed, idle", sessionEntry(id)+`?.textContent.includes("○ idle · $0.0000")`)

	// running, title, cost, ended: the ACP test agent's "text" turn costs
	// $0.0125; the test agent's slow turn holds the run open until it is
	// cancelled, so running can be seen.
	if v, status := control(t, r.http.URL, "", `{"t":"run.send","id":"s","session":"`+id+`","input":{"text":"slow turn"}}`); status != 200 {
		t.Fatalf("run.send = %d %v", status, v)
	}
	until(t, ctx, "the session shows running and its title", sessionEntry(id)+`?.textContent.includes("◐ running") && `+sessionEntry(id)+`.querySelector(".session-title").textContent === "slow turn"`)
	if v, status := control(t, r.http.URL, "", `{"t":"run.cancel","id":"c","session":"`+id+`"}`); status != 200 {
		t.Fatalf("run.cancel = %d %v", status, v)
	}
	until(t, ctx, "the session is idle again", sessionEntry(id)+`?.textContent.includes("○ idle")`)
	if v, status := control(t, r.http.URL, "", `{"t":"run.send","id":"s2","session":"`+id+`","input":{"text":"text please"}}`); status != 200 {
		t.Fatalf("run.send = %d %v", status, v)
	}
	until(t, ctx, "the cost shows", sessionEntry(id)+`?.textContent.includes("○ idle · $0.0125")`)
	screenshot(t, ctx, "live-list", "the session list updated live: a session another client created and ran, idle, costing $0.0125")
	if n := len(r.sent("session.list")); n != 0 {
		t.Errorf("the page sent session.list %d times, want 0: the list must follow /api/live, not poll", n)
	}

	// The stream drops and stays down while another session is created;
	// when it is back, the reconnect's snapshot brings it.
	r.liveDown.Store(true)
	before := r.lives.Load()
	r.http.CloseClientConnections()
	until(t, ctx, "the list says it is disconnected", `document.getElementById("sessions-state").dataset.state === "offline" && document.getElementById("sessions-state").textContent.includes("reconnecting")`)
	v, status = control(t, r.http.URL, "", `{"t":"session.new","id":"n2","title":"made while away"}`)
	if status != 200 {
		t.Fatalf("session.new = %d %v", status, v)
	}
	away := v["session"].(string)
	if evalJS[bool](t, ctx, `!!`+sessionEntry(away)) {
		t.Fatal("the session made while the list was down is listed already: the test's outage did not hold")
	}
	r.liveDown.Store(false)
	until(t, ctx, "the reconnected list has the session made while away", sessionEntry(away)+`?.textContent.includes("made while away")`)
	until(t, ctx, "the list is live again", `document.getElementById("sessions-state").dataset.state === "live"`)
	if r.lives.Load() <= before {
		t.Errorf("GET /api/live requests = %d after the drop, want more than %d (a reconnect)", r.lives.Load(), before)
	}
	if !evalJS[bool](t, ctx, sessionEntry(id)+`?.textContent.includes("$0.0125")`) {
		t.Error("after the reconnect the first session lost its cost")
	}
}
