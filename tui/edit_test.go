package tui_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/tui"
	"github.com/getorrery/orrery/ui"
)

// placeStructure places an inline component of the agent's in the live
// session shown on the screen.
func (l *live) placeStructure(id, placement, title, structure, data string) *kernel.Session {
	l.t.Helper()
	s := l.until("an idle session", contains("orrery · ses_", "idle"))
	sess, err := l.k.Session(context.Background(), sessionOf(l.t, s))
	if err != nil {
		l.t.Fatal(err)
	}
	in := kernel.ShowInput{ID: id, Placement: placement, Title: title}
	if strings.HasPrefix(structure, `{"kind"`) {
		in.Surface = json.RawMessage(structure)
	} else {
		in.Structure, in.Data = json.RawMessage(structure), json.RawMessage(data)
	}
	if err := sess.Show(context.Background(), ui.OwnerAgent, in); err != nil {
		l.t.Fatalf("Show(%s) = %v", id, err)
	}
	return sess
}

// noted waits until the session's log holds the hidden note an action on
// the agent's component becomes, and returns it.
func noted(t *testing.T, sess *kernel.Session, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fs, _, err := sess.Read(context.Background(), 0, 100000)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			var ev struct {
				Type  string          `json:"type"`
				Value json.RawMessage `json:"value"`
			}
			if json.Unmarshal(f.Data, &ev) != nil || ev.Type != "CUSTOM" {
				continue
			}
			var v struct {
				Text string `json:"text"`
			}
			if json.Unmarshal(ev.Value, &v) == nil && strings.HasPrefix(v.Text, prefix) {
				return v.Text
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log holds no note starting %q", prefix)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var (
	keyTab       = tea.KeyPressMsg{Code: tea.KeyTab}
	keyShiftTab  = tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
	keyBackspace = tea.KeyPressMsg{Code: tea.KeyBackspace}
	keySpace     = tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	keyRight     = tea.KeyPressMsg{Code: tea.KeyRight}
	keyLeft      = tea.KeyPressMsg{Code: tea.KeyLeft}
	keyDown      = tea.KeyPressMsg{Code: tea.KeyDown}
	keyCtrlU     = tea.KeyPressMsg{Code: 'u', Mod: tea.ModCtrl}
)

const deployForm = `{"type":"form","submit":"Deploy","on":{"submit":"deploy"},"fields":[
 {"name":"name","label":"Name","type":"text","required":true,"value":"${/name}"},
 {"name":"replicas","label":"Replicas","type":"number","min":1,"max":9,"value":"${/replicas}"},
 {"name":"canary","label":"Canary","type":"boolean","value":true},
 {"name":"region","label":"Region","type":"choice","choices":["eu","us","ap"],"value":"eu"},
 {"name":"tags","label":"Tags","type":"multichoice","choices":["web","api","beta"],"value":["web","beta"]}]}`

// TestFormEditedInPlace focuses an agent's form component, edits every
// kind of field with the keys (typing, Backspace, Ctrl-U, Space toggles,
// ←/→ choices, a multichoice option toggled), is refused a number out of
// range on Enter with the cursor put back on it, and submits: the kernel
// turns the ui.intent into the hidden note the model reads, holding exactly
// the values on the screen.
func TestFormEditedInPlace(t *testing.T) {
	l := startLive(t, "offline")
	sess := l.placeStructure("deploy", "inline", "Deploy", deployForm, `{"name":"web-1","replicas":3}`)
	l.until("the form", contains("┌ Deploy", "Name *: [web-1]", "Replicas: [3]", "Canary: [x]", "Region: [eu]", "Tags: [x] web  [ ] api  [x] beta", "[ Deploy ]"))
	l.press(keyF6)
	l.until("the focused form", contains("┏ Deploy", "❯ Name *: [web-1 ]", "Enter submits"))

	// A text field takes every printable key, x too (x dismisses only
	// where nothing is typed).
	l.press(keyBackspace)
	l.typeText("2x")
	l.press(keyBackspace)
	l.until("the name edited", contains("❯ Name *: [web-2 ]"))
	l.press(keyTab)
	l.press(keyCtrlU)
	l.typeText("12")
	l.press(keyTab)
	l.press(keySpace) // Canary off
	l.press(keyTab)
	l.press(keyRight) // Region eu → us
	l.press(keyTab)
	l.press(keyRight)
	l.press(keySpace) // Tags: api on
	l.until("every field edited", contains("Name *: [web-2]", "Replicas: [12]", "Canary: [ ]", "Region: [us]", "❯ Tags: [x] web  ‹[x] api›  [x] beta"))

	l.press(keyEnter)
	l.until("the range refused", contains("Replicas must lie between 1 and 9: change it, then Enter", "❯ Replicas: [12 ]"))
	l.press(keyBackspace)
	l.press(keyBackspace)
	l.typeText("4")
	l.press(keyEnter)
	l.until("the submit sent", contains("sent deploy to agent"))
	got := noted(t, sess, "[ext:ui] deploy: deploy")
	want := `[ext:ui] deploy: deploy {"canary":false,"name":"web-2","region":"us","replicas":4,"tags":["web","api","beta"]}`
	if got != want {
		t.Errorf("the note = %s, want %s", got, want)
	}

	// Shift-Tab walks back (the cursor stayed on Replicas) and round to
	// the button; a required field left empty is refused.
	l.press(keyShiftTab)
	l.press(keyShiftTab)
	l.until("the cursor on the button", contains("❯ [ Deploy ]"))
	l.press(keyTab)
	l.until("the cursor back on Name", contains("❯ Name *: [web-2 ]"))
	l.press(keyCtrlU)
	l.press(keyEnter)
	l.until("the required field refused", contains("Name is required: type a value in it, then Enter"))
}

// TestQuestionAnswered answers an agent's question components with the
// keys: a multiple choice with free text is sent as its submit answer; a
// single choice is picked with a digit and sent at once as its select.
func TestQuestionAnswered(t *testing.T) {
	l := startLive(t, "offline")
	sess := l.placeStructure("checks", "inline", "Checks",
		`{"type":"question","prompt":"Which checks should run?","multiple":true,"allowText":true,"choices":[{"label":"lint"},{"label":"unit"},{"label":"e2e","detail":"slow"}],"on":{"submit":"run"}}`, `{}`)
	l.until("the question", contains("Which checks should run?", "[ ] 1. lint", "[ ] 3. e2e — slow", "> (type an answer)"))
	l.press(keyF6)
	l.until("the focused question", contains("❯ [ ] 1. lint", "Enter sends"))
	l.press(keyEnter)
	l.until("nothing to send", contains("checks has no answer yet: pick a choice (1-9, or ↑/↓ and Space) or type an answer on the > row, then Enter"))
	l.typeText("13")
	l.press(keySpace) // the cursor is on e2e after 3: Space toggles it off
	l.press(keySpace) // and on again
	l.press(keyDown)
	l.typeText("only 2 files")
	l.press(keyBackspace)
	l.until("the picks and the text", contains("[x] 1. lint", "[ ] 2. unit", "[x] 3. e2e — slow", "❯ > only 2 file "))
	l.press(keyEnter)
	l.until("the answer sent", contains("sent run to agent"))
	if got, want := noted(t, sess, "[ext:ui] checks:"), `[ext:ui] checks: run {"choices":["lint","e2e"],"text":"only 2 file"}`; got != want {
		t.Errorf("the note = %s, want %s", got, want)
	}

	l.placeStructure("region", "inline", "Region",
		`{"type":"question","prompt":"Roll out where?","choices":[{"label":"EU","value":"eu"},{"label":"US","value":"us"}],"on":{"select":"roll"}}`, `{}`)
	l.until("the second question", contains("Roll out where?", "( ) 2. US"))
	l.press(keyF6) // the focus moves on from checks to region
	l.until("the second question focused", contains("❯ ( ) 1. EU"))
	l.typeText("2")
	l.until("the choice sent", contains("(•) 2. US", "sent roll to agent"))
	if got, want := noted(t, sess, "[ext:ui] region:"), `[ext:ui] region: roll ["us"]`; got != want {
		t.Errorf("the note = %s, want %s", got, want)
	}
}

// TestSurfaceFormTakesNoSubmit edits a form placed as a plain surface: it
// edits, but Enter says that nothing would hear it rather than sending an
// intent the kernel refuses.
func TestSurfaceFormTakesNoSubmit(t *testing.T) {
	l := startLive(t, "offline")
	l.placeStructure("plain", "inline", "Plain", `{"kind":{"t":"form","fields":[{"name":"q","type":"text","placeholder":"your name"}]}}`, "")
	l.until("the form", contains("q: [(your name)]"))
	l.press(keyF6)
	l.typeText("ann")
	l.until("the typed value", contains("❯ q: [ann ]"))
	l.press(keyEnter)
	l.until("the notice", contains("plain is a surface, not a component, so nothing would hear its submit"))
	l.press(tea.KeyPressMsg{Code: tea.KeyF2}) // not a key a text field takes: back to the composer
	l.until("the composer focused", func(s string) bool { return !strings.Contains(s, "┏ Plain") })
}

// TestEditGolden draws an agent's form and question at 80×24 after
// keys, as a terminal would send them, edited them in place (no key here
// sends anything), and compares the screen with its golden file.
func TestEditGolden(t *testing.T) {
	snapshot := `{"type":"STATE_SNAPSHOT","snapshot":{"ui":{"nodes":{
 "placed:agent:deploy":{"placement":"pane.left","title":"Deploy","owner":"agent","component":"agent#deploy","data":"/data/agent/deploy"},
 "placed:agent:checks":{"placement":"inline","title":"Checks","owner":"agent","component":"agent#checks","data":"/data/agent/checks"}},
 "components":{"agent#deploy":` + deployForm + `,
  "agent#checks":{"type":"question","prompt":"Which checks?","multiple":true,"allowText":true,"choices":[{"label":"lint"},{"label":"unit"},{"label":"e2e"}],"on":{"submit":"run"}}}},
 "surfaces":{},"data":{"agent":{"deploy":{"name":"web-1","replicas":3},"checks":{}}}}}`
	m := tui.New(tui.Options{})
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 24})
	if msg := m.Push(frame(1, strings.ReplaceAll(snapshot, "\n", ""))); msg != nil {
		m.Update(msg)
	}
	keys := []tea.KeyPressMsg{keyF6, keyBackspace, {Code: '9', Text: "9"}, keyTab, keyTab, keySpace, keyTab, keyLeft, keyTab, keyRight, keySpace,
		keyF6, {Code: '2', Text: "2"}, keyDown, keyDown, {Code: 'o', Text: "o"}, {Code: 'k', Text: "k"}}
	for _, k := range keys {
		if _, cmd := m.Update(k); cmd != nil {
			t.Fatalf("key %s sent something; only Enter sends", k)
		}
	}
	got := m.Screen()
	for _, want := range []string{"Name *: [web-9]", "Canary: [ ]", "Region: [ap]", "Tags: [x] web  [x]…", "[x] 2. unit", "❯ > ok "} {
		if !strings.Contains(got, want) {
			t.Errorf("Screen() lacks %q", want)
		}
	}
	golden(t, "testdata/golden/edit-100x24.txt", got)
}

// TestEditCursorGolden edits a focused form's text field in the middle
// at 80×24: End, a value typed with wide runes, ← back over them and a
// letter typed there, Ctrl-← a word back. The golden file marks the
// reverse-video cells between ⟦ and ⟧, so it shows the cursor mid-field.
func TestEditCursorGolden(t *testing.T) {
	snapshot := `{"type":"STATE_SNAPSHOT","snapshot":{"ui":{"nodes":{
 "placed:agent:deploy":{"placement":"inline","title":"Deploy","owner":"agent","component":"agent#deploy","data":"/data/agent/deploy"}},
 "components":{"agent#deploy":` + deployForm + `}},
 "surfaces":{},"data":{"agent":{"deploy":{"name":"web-1","replicas":3}}}}}`
	m := tui.New(tui.Options{})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	if msg := m.Push(frame(1, strings.ReplaceAll(snapshot, "\n", ""))); msg != nil {
		m.Update(msg)
	}
	keys := []tea.KeyPressMsg{keyF6, {Code: tea.KeyEnd}}
	for _, r := range "-東京" {
		keys = append(keys, tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	keys = append(keys, keyLeft, keyLeft, keyLeft, tea.KeyPressMsg{Code: 'x', Text: "x"})
	for _, k := range keys {
		if _, cmd := m.Update(k); cmd != nil {
			t.Fatalf("key %s sent something; only Enter sends", k)
		}
	}
	if got, want := m.Screen(), "❯ Name *: [web-1x-東京]"; !strings.Contains(got, want) {
		t.Errorf("Screen() lacks %q:\n%s", want, got)
	}
	got := tui.ReversedCells(m.View().Content)
	if want := "⟦❯ Name *: ⟧[web-1x⟦-⟧東京]"; !strings.Contains(got, want) {
		t.Errorf("the cursor is not on the - after the typed x: the drawing lacks %q:\n%s", want, got)
	}
	m.Update(tea.KeyPressMsg{Code: tea.KeyLeft, Mod: tea.ModCtrl})
	got = tui.ReversedCells(m.View().Content)
	if want := "[web-⟦1⟧x-東京]"; !strings.Contains(got, want) {
		t.Errorf("Ctrl-← did not go a word back: the drawing lacks %q:\n%s", want, got)
	}
	golden(t, "testdata/golden/edit-cursor-80x24.txt", got)
}

// TestComposerEditsInLine edits the composer in the middle of its line:
// a word back, text typed there, Ctrl-W, Home and End, and the cursor
// (a reversed cell) where the keys left it.
func TestComposerEditsInLine(t *testing.T) {
	m := tui.New(tui.Options{})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	press := func(keys ...tea.KeyPressMsg) {
		for _, k := range keys {
			m.Update(k)
		}
	}
	typeText := func(s string) {
		for _, r := range s {
			press(tea.KeyPressMsg{Code: r, Text: string(r)})
		}
	}
	typeText("run the tests")
	press(tea.KeyPressMsg{Code: tea.KeyLeft, Mod: tea.ModAlt})
	typeText("unit ")
	press(tea.KeyPressMsg{Code: tea.KeyHome})
	press(tea.KeyPressMsg{Code: tea.KeyDelete}, tea.KeyPressMsg{Code: tea.KeyDelete}, tea.KeyPressMsg{Code: tea.KeyDelete})
	typeText("skip")
	press(tea.KeyPressMsg{Code: tea.KeyRight, Mod: tea.ModCtrl}, tea.KeyPressMsg{Code: 'w', Mod: tea.ModCtrl})
	typeText("all")
	got := tui.ReversedCells(m.View().Content)
	if want := "› skip all⟦ ⟧unit tests"; !strings.Contains(got, want) {
		t.Errorf("the composer does not read %q:\n%s", want, got)
	}
	press(tea.KeyPressMsg{Code: 'e', Mod: tea.ModCtrl}, tea.KeyPressMsg{Code: tea.KeyLeft})
	if got, want := tui.ReversedCells(m.View().Content), "› skip all unit test⟦s⟧"; !strings.Contains(got, want) {
		t.Errorf("after Ctrl-E ← the composer does not read %q:\n%s", want, got)
	}
}

// formModel is a model drawing an agent's form inline and a pane, at
// 120×40, focused on the form's first (text) field when focus is set.
func formModel(b *testing.B, focus bool) *tui.Model {
	snapshot := `{"type":"STATE_SNAPSHOT","snapshot":{"ui":{"nodes":{
 "placed:agent:deploy":{"placement":"inline","title":"Deploy","owner":"agent","component":"agent#deploy","data":"/data/agent/deploy"},
 "placed:agent:files":{"placement":"pane.left","title":"Files","owner":"agent","surface":{"kind":{"t":"tree","nodes":[{"label":"cmd"},{"label":"tui"}]}}}},
 "components":{"agent#deploy":` + deployForm + `}},"surfaces":{},"data":{"agent":{"deploy":{"name":"web-1","replicas":3}}}}}`
	m := tui.New(tui.Options{})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	if msg := m.Push(frame(1, strings.ReplaceAll(snapshot, "\n", ""))); msg != nil {
		m.Update(msg)
	}
	if focus {
		m.Update(keyF6)
		m.Update(keyF6) // the pane first, then the form
		if !strings.Contains(m.Screen(), "❯ Name *: [web-1 ]") {
			b.Fatalf("the form is not focused:\n%s", m.Screen())
		}
	}
	return m
}

// BenchmarkFormKeystroke is one key typed into a focused form's text field
// and the screen drawn after it. Its baseline,
// BenchmarkComposerKeystroke, is the same key typed into the composer of
// the same screen: the ratio is what editing in place costs over typing.
func BenchmarkFormKeystroke(b *testing.B) {
	benchKeystroke(b, true)
}

// BenchmarkComposerKeystroke is BenchmarkFormKeystroke's baseline.
func BenchmarkComposerKeystroke(b *testing.B) {
	benchKeystroke(b, false)
}

func benchKeystroke(b *testing.B, focus bool) {
	m := formModel(b, focus)
	a, bs := tea.KeyPressMsg{Code: 'a', Text: "a"}, keyBackspace
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := a
		if i%2 == 1 {
			k = bs // keep the text short: type, delete, type …
		}
		i++
		m.Update(k)
		_ = m.View()
	}
}

// BenchmarkTypeIntoLongText is one character typed at the end of a
// composer that already holds 100,000, and the screen drawn after it, as
// Bubble Tea draws it after every key (a paste that arrives as keys,
// without bracketed paste, is that many such keys). Its baseline,
// BenchmarkTypeIntoLongTextBaseline, types into an empty composer: the
// ratio is what the text already there costs each key, which should be
// nothing (it was the whole text's grapheme boundaries and its wrapping,
// each key: a 100 KB paste took minutes).
func BenchmarkTypeIntoLongText(b *testing.B) { benchTypeInto(b, 100_000) }

// BenchmarkTypeIntoLongTextBaseline is BenchmarkTypeIntoLongText's baseline.
func BenchmarkTypeIntoLongTextBaseline(b *testing.B) { benchTypeInto(b, 0) }

func benchTypeInto(b *testing.B, n int) {
	m := tui.New(tui.Options{})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	if n > 0 {
		m.Update(tea.PasteMsg{Content: strings.Repeat("lorem ipsum ", n/12+1)[:n]})
	}
	a := tea.KeyPressMsg{Code: 'a', Text: "a"}
	b.ReportAllocs()
	for b.Loop() {
		m.Update(a)
		_ = m.View()
	}
}
