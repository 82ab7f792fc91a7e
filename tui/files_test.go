package tui_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/termtext"
	"github.com/getorrery/orrery/tui"
)

// TestMentionAttachedElsewhere: attached to a kernel that is not the
// host's (--connect), the TUI reads none of this machine's files. Tab on
// an @word asks the kernel (workspace.files) and completes from its
// workspace, or shows its refusal; a sent @mention goes as text, and the
// log holds no attachment of the local file.
func TestMentionAttachedElsewhere(t *testing.T) {
	local := t.TempDir()
	if err := os.WriteFile(filepath.Join(local, "notes.txt"), []byte("local secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLive(t, "offline", func(o *tui.Options) { o.Workspace, o.Host = local, false })
	if err := os.WriteFile(filepath.Join(l.dir, "nothing-local.txt"), []byte("kernel side"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := l.until("an idle session", contains("orrery · ses_", "idle"))
	id := sessionOf(t, s)

	type workspaceFiles struct {
		protocol.Envelope
		Session string `json:"session"`
		Prefix  string `json:"prefix"`
	}
	raw, listErr := l.cl.Do(context.Background(), &workspaceFiles{Envelope: protocol.Envelope{T: "workspace.files"}, Session: id, Prefix: "no"})
	l.typeText("read @no")
	l.press(tea.KeyPressMsg{Code: tea.KeyTab})
	if listErr != nil {
		l.until("the kernel's refusal", contains("the kernel lists no workspace files ("+termtext.StripLine(listErr.Error())[:30]))
		if strings.Contains(l.m.Screen(), "@notes.txt") {
			t.Fatal("Tab completed a local file though the kernel is elsewhere")
		}
	} else {
		// The kernel answers: the completion is its answer, whatever its
		// workspace holds.
		var v struct {
			Files []string `json:"files"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		switch len(v.Files) {
		case 0:
			l.until("no match", contains("no file of the kernel's workspace matches @no"))
		case 1:
			l.until("the kernel's file", contains("› read @"+v.Files[0]))
		default:
			l.until("the kernel's files", contains("files of the kernel's workspace:", v.Files[0]))
		}
	}
	l.press(tea.KeyPressMsg{Code: 'u', Mod: tea.ModCtrl})
	l.typeText("read @notes.txt")
	l.press(keyEnter)
	l.until("the answer", contains("@notes.txt names no file of the kernel's workspace", "You said"))
	// A mention of the kernel's own file goes as a path attachment, which
	// the kernel reads from its workspace.
	l.press(tea.KeyPressMsg{Code: 'u', Mod: tea.ModCtrl})
	l.typeText("read @nothing-local.txt")
	l.press(keyEnter)
	sess, err := l.k.Session(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	attached := false
	for range 200 {
		fs, _, err := sess.Read(context.Background(), 0, 100000)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if strings.Contains(string(f.Data), "local secret") {
				t.Fatalf("the log holds the local file's text:\n%s", f.Data)
			}
			attached = attached || strings.Contains(string(f.Data), `File @nothing-local.txt:\nkernel side`)
		}
		if attached {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if !attached {
		t.Error("the kernel's file @nothing-local.txt was not attached from its workspace")
	}
}
