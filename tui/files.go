package tui

import (
	"encoding/json"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/termtext"
)

// workspaceFiles is the workspace.files request: the files of the
// session's workspace whose path (or, for a prefix without "/", whose base
// name) starts with Prefix. A kernel that does not know it refuses it.
type workspaceFiles struct {
	protocol.Envelope
	Session string `json:"session"`
	Prefix  string `json:"prefix,omitempty"`
	Limit   int    `json:"limit,omitempty"`
}

// filesMsg is the kernel's answer to workspace.files for the @word that
// started at start.
type filesMsg struct {
	word      string
	start     int
	files     []string
	truncated bool
	err       error
}

// maxListedFiles is how many files an @ completion lists.
const maxListedFiles = 20

// remoteFilesCmd asks the kernel for the files an @word may name.
func (m *Model) remoteFilesCmd(word string, start int) tea.Cmd {
	cl, ctx, session := m.opts.Client, m.ctx, m.session
	if session == "" {
		m.notice("no session is open yet: wait for it, then Tab again")
		return nil
	}
	return func() tea.Msg {
		raw, err := cl.Do(ctx, &workspaceFiles{Envelope: protocol.Envelope{T: "workspace.files"}, Session: session, Prefix: word[1:], Limit: maxListedFiles})
		msg := filesMsg{word: word, start: start, err: err}
		if err == nil {
			var v struct {
				Files     []string `json:"files"`
				Truncated bool     `json:"truncated"`
			}
			if err := json.Unmarshal(raw, &v); err != nil {
				msg.err = err
			}
			msg.files, msg.truncated = v.Files, v.Truncated
		}
		return msg
	}
}

// completeFiles completes the @word with the kernel's answer, unless the
// person has typed on since.
func (m *Model) completeFiles(msg filesMsg) {
	if msg.err != nil {
		m.notice("the kernel lists no workspace files (" + termtext.StripLine(msg.err.Error()) + "): type the path yourself; the agent reads it from the kernel's workspace")
		return
	}
	if word, start := m.input.currentWord(); word != msg.word || start != msg.start {
		return
	}
	files := make([]string, 0, len(msg.files))
	for _, f := range msg.files {
		if f = termtext.StripLine(f); f != "" && !strings.ContainsAny(f, " \t") {
			files = append(files, f)
		}
	}
	switch {
	case len(files) == 0:
		m.notice("no file of the kernel's workspace matches " + termtext.StripLine(msg.word))
		return
	case len(files) == 1:
		m.input.replaceWord(msg.start, "@"+files[0])
		return
	}
	if p := commonPrefix(files); strings.HasPrefix(p, msg.word[1:]) {
		m.input.replaceWord(msg.start, "@"+p)
	}
	m.scr.list = append([]string{"files of the kernel's workspace:"}, files...)
	if msg.truncated {
		m.scr.list = append(m.scr.list, "… more: type more of the name")
	}
}
