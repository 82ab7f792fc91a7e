package web_test

import (
	"strings"
	"testing"

	"github.com/getorrery/orrery/internal/testdisk"
)

// TestFullDiskInTheBrowser: the page of a server whose disk fills up. A
// prompt whose run cannot be logged ends with the run's error on the page
// (store_failed, saying to free space) and the composer free again; the
// next prompt is refused with the reason; once there is room the next one
// is answered.
func TestFullDiskInTheBrowser(t *testing.T) {
	dir := testdisk.Tmpfs(t, 8<<20)
	r := newRig(t, rigOptions{dataDir: dir})
	ctx := browser(t, 1280, 800)
	openNewSession(t, ctx, r.http.URL)
	prompt(t, ctx, "hello")
	until(t, ctx, "the first answer", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent.includes('You said: "hello"'))`)

	fill := testdisk.Fill(t, dir)
	// Room for the prompt's commit, not for the answer, which echoes the
	// prompt word by word: the run starts, then its frames fail.
	fill.Leave(400 << 10)
	prompt(t, ctx, strings.Repeat("word ", 20_000))
	until(t, ctx, "the run's store_failed end", `document.body.textContent.includes("The run ended (store_failed)") && document.body.textContent.includes("free disk space")`)
	until(t, ctx, "no run shown in flight", `window.orrery.view.runId === ""`)
	prompt(t, ctx, "again")
	until(t, ctx, "the refusal", `document.body.textContent.includes("cannot be written")`)

	fill.Free()
	prompt(t, ctx, "back")
	until(t, ctx, "the answer with room again", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent.includes('You said: "back"'))`)
	screenshot(t, ctx, "full-disk", "a run ended by a full disk, a refused prompt, and an answer once there was room")
}
