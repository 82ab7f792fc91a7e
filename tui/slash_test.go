package tui_test

import (
	"context"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/getorrery/orrery/protocol"
)

// TestAgentSlashCommands appends the orrery.commands event an ACP agent's
// available_commands_update becomes, then completes the advertised
// commands with Tab beside the TUI's own, lists them in /help, and sends
// the chosen one as the prompt text; a name the TUI has itself stays the
// TUI's.
func TestAgentSlashCommands(t *testing.T) {
	l := startLive(t, "offline")
	s := l.until("an idle session", contains("orrery · ses_", "idle"))
	sess, err := l.k.Session(context.Background(), sessionOf(t, s))
	if err != nil {
		t.Fatal(err)
	}
	cmds := `{"commands":[{"name":"review","description":"Review the diff","input":{"hint":"what to look at"}},` +
		`{"name":"research","description":"Dig into a topic"},{"name":"cost","description":"the agent's own cost"},{"name":"bad name"},` +
		`{"name":"evil","description":"\u001b]0;pwned\u0007shown"}]}`
	if err := sess.Append(context.Background(), &protocol.Custom{Name: "orrery.commands", Value: []byte(cmds)}); err != nil {
		t.Fatal(err)
	}
	l.typeText("/re")
	// The event is applied once its frame arrives: Tab again until it has.
	l.until("both commands listed", func(string) bool {
		l.press(tea.KeyPressMsg{Code: tea.KeyTab})
		return strings.Contains(l.m.Screen(), "/research  Dig into a topic  (the agent's)")
	})
	s = l.until("the list", contains("commands:", "/review <what to look at>  Review the diff  (the agent's)"))
	if strings.Contains(s, "/resume") {
		t.Errorf("the completion offers a command nobody has:\n%s", s)
	}
	l.typeText("v")
	l.press(tea.KeyPressMsg{Code: tea.KeyTab})
	l.until("the completed command", contains("› /review ", "Enter sends it to the agent as your prompt"))
	l.typeText("the tests")
	l.press(keyEnter)
	l.until("the agent's answer", contains("› /review the tests", `You said: "/review the tests"`, "idle"))

	// The TUI's own /cost comes first; the agent's is not offered twice.
	l.typeText("/co")
	l.press(tea.KeyPressMsg{Code: tea.KeyTab})
	l.until("the TUI's /cost", contains("› /cost "))
	l.press(keyEnter)
	l.until("the session's cost", contains("cost of this session: $"))

	l.typeText("/help")
	l.press(keyEnter)
	s = l.until("the help", contains("the agent's commands, sent to it as your prompt:", "/research  Dig into a topic", "/evil  shown"))
	if strings.Contains(s, "/cost  the agent's own cost") || strings.Contains(s, "bad name") {
		t.Errorf("/help lists a command the agent cannot be sent:\n%s", s)
	}
	// // sends a line as it is.
	l.typeText("//nosuch thing")
	l.press(keyEnter)
	l.until("the line sent as it is", contains(`You said: "/nosuch thing"`))
	l.typeText("/nosuch")
	l.press(keyEnter)
	l.until("the unknown command", contains("unknown command /nosuch: /help lists the commands, the agent's among them"))
}
