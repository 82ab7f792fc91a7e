package tui

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/getorrery/orrery/client"
)

func TestDetectGraphics(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"TERM": "xterm-kitty"}, GraphicsKitty},
		{map[string]string{"TERM": "xterm-256color", "KITTY_WINDOW_ID": "1"}, GraphicsKitty},
		{map[string]string{"TERM_PROGRAM": "iTerm.app"}, GraphicsITerm2},
		{map[string]string{"TERM_PROGRAM": "WezTerm"}, GraphicsITerm2},
		{map[string]string{"TERM": "xterm-kitty", "TMUX": "/tmp/tmux-0/default,1,0"}, GraphicsNone},
		{map[string]string{"TERM": "screen-256color", "TERM_PROGRAM": "iTerm.app"}, GraphicsNone},
		{map[string]string{"TERM": "xterm-256color"}, GraphicsNone},
	} {
		if got := DetectGraphics(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("DetectGraphics(%v) = %q, want %q", c.env, got, c.want)
		}
	}
}

func TestImageBytes(t *testing.T) {
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG fake"))
	big := base64.StdEncoding.EncodeToString(make([]byte, MaxImageBytes+1))
	for _, c := range []struct {
		name     string
		k        kind
		protocol string
		err      string
	}{
		{"png on kitty", kind{Mime: "image/png", Data: png}, GraphicsKitty, ""},
		{"jpeg on kitty", kind{Mime: "image/jpeg", Data: png}, GraphicsKitty, "PNG only"},
		{"jpeg on iterm2", kind{Mime: "image/jpeg", Data: png}, GraphicsITerm2, ""},
		{"no protocol", kind{Mime: "image/png", Data: png}, GraphicsNone, "no graphics protocol"},
		{"over 5 MB", kind{Mime: "image/png", Data: big}, GraphicsITerm2, "over 5000000 bytes"},
		{"not base64", kind{Mime: "image/png", Data: "!!"}, GraphicsITerm2, "not base64"},
	} {
		_, err := imageBytes(&c.k, c.protocol)
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: imageBytes() = %v, want %q", c.name, err, c.err)
		}
	}
}

func TestKittyImageChunks(t *testing.T) {
	data := make([]byte, 10000) // 13,336 base64 bytes: 4 chunks
	seq := kittyImage(data, 20, 8)
	if n := strings.Count(seq, "\x1b_G"); n != 4 {
		t.Errorf("kittyImage() has %d commands, want 4", n)
	}
	if !strings.HasPrefix(seq, "\x1b_Ga=T,f=100,q=2,C=1,c=20,r=8,m=1;") {
		t.Errorf("kittyImage() starts %q", seq[:40])
	}
	if !strings.Contains(seq, "\x1b_Gm=0;") || strings.Count(seq, "m=1") != 3 {
		t.Errorf("kittyImage() does not end its chunks with m=0 after three m=1")
	}
}

// TestImageInPane places an image in a pane: with a graphics protocol its
// cells are left blank and the picture is sent to the terminal at the
// pane's content position; without one, its alt is drawn.
func TestImageInPane(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "ui", "testdata", "image", "png.json"))
	if err != nil {
		t.Fatal(err)
	}
	snap := fmt.Sprintf(`{"type":"STATE_SNAPSHOT","snapshot":{"ui":{"nodes":{"placed:agent:pic":{"placement":"pane.right","title":"Pic","owner":"agent","surface":%s}}},"surfaces":{}},"metadata":{"orrery":{"seq":1}}}`, raw)
	for _, protocol := range []string{GraphicsNone, GraphicsKitty} {
		m := New(Options{Graphics: protocol})
		m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
		if msg := m.Push(client.Frame{Seq: 1, Data: []byte(snap)}); msg != nil {
			m.Update(msg)
		}
		screen := m.Screen()
		_ = m.View()
		_, cmd := m.Update(imageTickMsg{})
		raws := rawOf(cmd)
		switch protocol {
		case GraphicsNone:
			if !strings.Contains(screen, "[image: ") {
				t.Errorf("with no protocol the pane does not show the alt:\n%s", screen)
			}
			if raws != "" {
				t.Errorf("with no protocol the model wrote %q", raws)
			}
		case GraphicsKitty:
			if strings.Contains(screen, "[image: ") {
				t.Errorf("with kitty the pane shows the alt:\n%s", screen)
			}
			// The right pane is 30 wide at column 90; its content starts
			// one row and two columns in: row 2, column 93 (1-based).
			if !strings.Contains(raws, "\x1b[2;93H\x1b_Ga=T,f=100,q=2,C=1,c=26,r=") {
				t.Errorf("with kitty the model did not draw the picture in the pane: %q", raws[:min(len(raws), 80)])
			}
		}
	}
}

// rawOf runs cmd and returns what it writes raw to the terminal.
func rawOf(cmd tea.Cmd) string {
	if cmd == nil {
		return ""
	}
	switch msg := cmd().(type) {
	case tea.RawMsg:
		return fmt.Sprint(msg.Msg)
	case tea.BatchMsg:
		var b strings.Builder
		for _, c := range msg {
			if c == nil {
				continue
			}
			if r, ok := c().(tea.RawMsg); ok {
				b.WriteString(fmt.Sprint(r.Msg))
			}
		}
		return b.String()
	}
	return ""
}
