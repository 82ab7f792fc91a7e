package tui

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// Graphics protocols a terminal may offer, as DetectGraphics names them.
const (
	GraphicsNone   = ""
	GraphicsKitty  = "kitty"  // PNG only
	GraphicsITerm2 = "iterm2" // any format the terminal decodes
)

// MaxImageBytes is the most an image may hold once decoded; a larger one is
// drawn as its alt.
const MaxImageBytes = 5_000_000

// DetectGraphics names the graphics protocol of the terminal that getenv
// describes: Kitty's for kitty (and terminals that say they speak it),
// iTerm2's for iTerm2 and WezTerm, none inside tmux or screen (which do not
// pass images through without configuration) or anywhere else.
func DetectGraphics(getenv func(string) string) string {
	term := getenv("TERM")
	if getenv("TMUX") != "" || strings.HasPrefix(term, "screen") || strings.HasPrefix(term, "tmux") {
		return GraphicsNone
	}
	switch {
	case term == "xterm-kitty" || getenv("KITTY_WINDOW_ID") != "" || getenv("TERM_PROGRAM") == "ghostty":
		return GraphicsKitty
	case getenv("TERM_PROGRAM") == "iTerm.app" || getenv("LC_TERMINAL") == "iTerm2" || getenv("TERM_PROGRAM") == "WezTerm":
		return GraphicsITerm2
	}
	return GraphicsNone
}

// imageBytes decodes an image surface's data for protocol, or says why it
// must be drawn as its alt.
func imageBytes(k *kind, protocol string) ([]byte, error) {
	if protocol == GraphicsNone {
		return nil, fmt.Errorf("this terminal has no graphics protocol")
	}
	if protocol == GraphicsKitty && k.Mime != "image/png" {
		return nil, fmt.Errorf("kitty draws PNG only")
	}
	if base64.StdEncoding.DecodedLen(len(k.Data)) > MaxImageBytes+3 {
		return nil, fmt.Errorf("the image is over %d bytes", MaxImageBytes)
	}
	b, err := base64.StdEncoding.DecodeString(k.Data)
	if err != nil {
		return nil, fmt.Errorf("the image data is not base64: %w", err)
	}
	if len(b) > MaxImageBytes {
		return nil, fmt.Errorf("the image is over %d bytes", MaxImageBytes)
	}
	return b, nil
}

// kittyChunk is the most base64 one Kitty graphics command carries.
const kittyChunk = 4096

// kittyImage returns the Kitty graphics commands that draw a PNG scaled
// into cols×rows cells at the cursor, without moving the cursor (C=1) and
// without the terminal answering on the input (q=2).
func kittyImage(png []byte, cols, rows int) string {
	enc := base64.StdEncoding.EncodeToString(png)
	var b strings.Builder
	for i := 0; i < len(enc) || i == 0; i += kittyChunk {
		end := min(len(enc), i+kittyChunk)
		more := 0
		if end < len(enc) {
			more = 1
		}
		if i == 0 {
			fmt.Fprintf(&b, "\x1b_Ga=T,f=100,q=2,C=1,c=%d,r=%d,m=%d;%s\x1b\\", cols, rows, more, enc[i:end])
		} else {
			fmt.Fprintf(&b, "\x1b_Gm=%d;%s\x1b\\", more, enc[i:end])
		}
		if end == len(enc) {
			break
		}
	}
	return b.String()
}

// kittyClear deletes every image Kitty shows.
const kittyClear = "\x1b_Ga=d,d=A,q=2\x1b\\"

// itermImage returns iTerm2's inline-image sequence for data scaled into
// cols×rows cells at the cursor.
func itermImage(data []byte, cols, rows int) string {
	return fmt.Sprintf("\x1b]1337;File=inline=1;size=%d;width=%d;height=%d;preserveAspectRatio=1:%s\a",
		len(data), cols, rows, base64.StdEncoding.EncodeToString(data))
}

// imagePlacement is an image drawn at a screen position.
type imagePlacement struct {
	node       string
	row, col   int // the top-left cell, 0-based
	cols, rows int
	data       []byte
}

// imageSequence returns what draws placements with protocol: each image
// at its position, the cursor saved and restored around them. With clear,
// Kitty's earlier images are deleted first.
func imageSequence(protocol string, ps []imagePlacement, clear bool) string {
	var b strings.Builder
	b.WriteString("\x1b7") // save the cursor
	if protocol == GraphicsKitty && clear {
		b.WriteString(kittyClear)
	}
	for _, p := range ps {
		fmt.Fprintf(&b, "\x1b[%d;%dH", p.row+1, p.col+1)
		switch protocol {
		case GraphicsKitty:
			b.WriteString(kittyImage(p.data, p.cols, p.rows))
		case GraphicsITerm2:
			b.WriteString(itermImage(p.data, p.cols, p.rows))
		}
	}
	b.WriteString("\x1b8") // restore it
	return b.String()
}
