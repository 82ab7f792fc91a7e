package kernel_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getorrery/orrery/consent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
)

// touchTool writes nothing but counts its calls; its subject is its path,
// and it is not read-only, so the gate asks about it by default.
type touchTool struct{ calls *atomic.Int32 }

func (touchTool) Spec() tool.Spec {
	return tool.Spec{Name: "touch", Description: "touches a file", PathSubject: true,
		Parameters: json.RawMessage(`{"type":"object","required":["path"],"properties":{"path":{"type":"string"}}}`)}
}

func (t touchTool) Call(ctx context.Context, c tool.Call) (tool.Result, error) {
	t.calls.Add(1)
	return tool.Result{Text: "touched"}, nil
}

func (touchTool) Subject(args json.RawMessage) (string, error) {
	var a struct{ Path string }
	err := json.Unmarshal(args, &a)
	return a.Path, err
}

var consentClient = kernel.Caller{Client: "web", Draws: []string{"thread", "tools", "consent"}}

// consentEnv is a kernel whose model calls touch(path) once per turn pair.
func consentEnv(t *testing.T, mode storeMode, calls *atomic.Int32, opts ...option) (*env, *kernel.Session) {
	t.Helper()
	turns := []map[string]any{
		{"tool_calls": []map[string]any{{"name": "touch", "args": map[string]string{"path": "src/a.go"}}}},
		{"text": []string{"done"}},
		{"tool_calls": []map[string]any{{"name": "touch", "args": map[string]string{"path": "src/b.go"}}}},
		{"text": []string{"done again"}},
	}
	opts = append([]option{func(c *kernel.Config) { c.Tools = tool.NewSet(touchTool{calls}) }}, opts...)
	e := mode.newEnv(t, script(t, turns...), opts...)
	return e, e.session(t)
}

// toolOutcome returns the outcome of the run's one TOOL_CALL_RESULT.
func toolOutcome(t *testing.T, evs []protocol.Event) map[string]string {
	t.Helper()
	for _, ev := range evs {
		if r, ok := ev.(*protocol.ToolCallResult); ok {
			var o map[string]string
			if err := json.Unmarshal(r.Orrery().Outcome, &o); err != nil {
				t.Fatalf("outcome %s: %v", r.Orrery().Outcome, err)
			}
			o["content"] = r.Content.String()
			return o
		}
	}
	t.Fatalf("no TOOL_CALL_RESULT in %v", types(evs))
	return nil
}

func TestConsentRules(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		tests := []struct {
			name       string
			cfg        option
			wantStatus string
			wantRule   string
			wantCalls  int32
		}{
			{"deny rule", func(c *kernel.Config) { c.Consent = consent.Rules{Deny: []string{"touch(src/**)"}} }, "denied", `deny = ["touch(src/**)"]`, 0},
			{"allow rule", func(c *kernel.Config) { c.Consent = consent.Rules{Allow: []string{"touch(src/*.go)"}} }, "ok", `allow = ["touch(src/*.go)"]`, 1},
			{"deny beats allow", func(c *kernel.Config) {
				c.Consent = consent.Rules{Allow: []string{"touch"}, Deny: []string{"touch(src/a.go)"}}
			}, "denied", `deny = ["touch(src/a.go)"]`, 0},
			{"ask with no client that draws consent", func(c *kernel.Config) {}, "denied", "no client that draws consent is attached", 0},
			{"--yes", func(c *kernel.Config) { c.AutoApprove = true }, "ok", "--yes", 1},
			{"--yes does not beat deny", func(c *kernel.Config) {
				c.AutoApprove = true
				c.Consent = consent.Rules{Deny: []string{"touch"}}
			}, "denied", `deny = ["touch"]`, 0},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var calls atomic.Int32
				_, s := consentEnv(t, mode, &calls, tt.cfg)
				evs, _ := send(t, s, kernel.SendInput{Text: "touch it"})
				o := toolOutcome(t, evs)
				if o["status"] != tt.wantStatus || !strings.Contains(o["rule"], tt.wantRule) {
					t.Errorf("outcome = %v, want status %s and a rule naming %q", o, tt.wantStatus, tt.wantRule)
				}
				if got := calls.Load(); got != tt.wantCalls {
					t.Errorf("the tool ran %d times, want %d", got, tt.wantCalls)
				}
				if tt.wantStatus == "denied" && !strings.Contains(o["content"], "denied") {
					t.Errorf("the model reads %q, want a sentence saying the call was denied", o["content"])
				}
				if text(evs) != "done" {
					t.Errorf("the run's text = %q, want the model to carry on after the result", text(evs))
				}
			})
		}
	})
}

// watcher follows a session as a client that draws consent.
type watcher struct {
	t   *testing.T
	sub *kernel.Subscription
	evs []protocol.Event
}

func watch(t *testing.T, s *kernel.Session, caller kernel.Caller) *watcher {
	t.Helper()
	head := s.Head()
	sub, err := s.SubscribeWith(context.Background(), kernel.SubscribeOptions{Since: &head, Caller: caller})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	return &watcher{t: t, sub: sub}
}

// until reads events until pred holds for one, and returns it.
func (w *watcher) until(pred func(protocol.Event) bool) protocol.Event {
	w.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		for _, f := range w.sub.Take(nil) {
			ev, err := protocol.DecodeEvent(f.Data)
			if err != nil {
				w.t.Fatal(err)
			}
			w.evs = append(w.evs, ev)
		}
		for _, ev := range w.evs {
			if pred(ev) {
				return ev
			}
		}
		select {
		case <-w.sub.Ready():
		case <-w.sub.Done():
			w.t.Fatalf("subscription ended: %v", w.sub.Err())
		case <-timeout:
			w.t.Fatalf("event not seen; got %v", types(w.evs))
		}
	}
}

func custom(name string) func(protocol.Event) bool {
	return func(ev protocol.Event) bool {
		c, ok := ev.(*protocol.Custom)
		return ok && c.Name == name
	}
}

func terminal(ev protocol.Event) bool { return ev.EventType().Terminal() }

func requested(t *testing.T, w *watcher) kernel.ConsentRequested {
	t.Helper()
	var req kernel.ConsentRequested
	if err := json.Unmarshal(w.until(custom(kernel.ConsentRequestedEvent)).(*protocol.Custom).Value, &req); err != nil {
		t.Fatal(err)
	}
	return req
}

func resolved(t *testing.T, w *watcher) kernel.ConsentResolved {
	t.Helper()
	var res kernel.ConsentResolved
	if err := json.Unmarshal(w.until(custom(kernel.ConsentResolvedEvent)).(*protocol.Custom).Value, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestConsentAsk(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		var calls atomic.Int32
		_, s := consentEnv(t, mode, &calls)
		w := watch(t, s, consentClient)
		if _, err := s.Send(context.Background(), kernel.SendInput{Text: "touch it"}); err != nil {
			t.Fatal(err)
		}
		req := requested(t, w)
		if req.Tool != "touch" || req.Subject != "src/a.go" || req.Node != "placed:host:consent" || len(req.Options) != 3 {
			t.Fatalf("requested = %+v, want touch(src/a.go) under placed:host:consent with three options", req)
		}
		// The question is placed in the shared state for every client.
		w.until(func(ev protocol.Event) bool {
			d, ok := ev.(*protocol.StateDelta)
			return ok && len(d.Delta) > 0 && d.Delta[0].Path == "/ui/nodes/placed:host:consent" && strings.Contains(string(d.Delta[0].Value), `"t":"question"`)
		})
		if calls.Load() != 0 {
			t.Fatal("the tool ran before anyone answered")
		}

		refusals := []struct {
			name           string
			caller         kernel.Caller
			request, opt   string
			wantErrContain string
		}{
			{"client that does not draw consent", kernel.Caller{Client: "cli", Draws: []string{"thread", "tools"}}, req.Request, kernel.ConsentAllowOnce, "does not draw consent"},
			{"option not offered", consentClient, req.Request, "always", "allow_once, allow_session, deny"},
			{"unknown request", consentClient, "consent_nope", kernel.ConsentAllowOnce, "no consent request"},
		}
		for _, r := range refusals {
			err := s.AnswerConsent(context.Background(), r.caller, r.request, r.opt)
			if err == nil || !strings.Contains(err.Error(), r.wantErrContain) {
				t.Errorf("%s: AnswerConsent() = %v, want a refusal naming %q", r.name, err, r.wantErrContain)
			}
		}

		if err := s.AnswerConsent(context.Background(), consentClient, req.Request, kernel.ConsentAllowSession); err != nil {
			t.Fatalf("AnswerConsent() = %v", err)
		}
		res := resolved(t, w)
		if res.Outcome != kernel.ConsentAllowed || res.Option != kernel.ConsentAllowSession || res.Client != "web" {
			t.Errorf("resolved = %+v, want allowed for this session by web", res)
		}
		w.until(terminal)
		o := toolOutcome(t, w.evs)
		if o["status"] != "ok" || o["rule"] != "allowed for this session by web" || calls.Load() != 1 {
			t.Errorf("outcome = %v after %d calls, want the call run once, allowed for this session by web", o, calls.Load())
		}
		// The question is gone from the state once answered.
		removed := false
		for _, ev := range w.evs {
			if d, ok := ev.(*protocol.StateDelta); ok && d.Delta[0].Op == "remove" && d.Delta[0].Path == "/ui/nodes/placed:host:consent" {
				removed = true
			}
		}
		if !removed {
			t.Error("the consent question was never removed from the state")
		}

		// The session grant covers the next call of the same tool: no question.
		evs, _ := send(t, s, kernel.SendInput{Text: "again"})
		for _, ev := range evs {
			if custom(kernel.ConsentRequestedEvent)(ev) {
				t.Fatal("asked again after allow for this session")
			}
		}
		if o := toolOutcome(t, evs); o["status"] != "ok" || calls.Load() != 2 {
			t.Errorf("second outcome = %v, calls %d; want ok and 2", o, calls.Load())
		}
	})
}

func TestConsentRaces(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		t.Run("two clients answer at once", func(t *testing.T) {
			var calls atomic.Int32
			_, s := consentEnv(t, mode, &calls)
			w := watch(t, s, consentClient)
			if _, err := s.Send(context.Background(), kernel.SendInput{Text: "go"}); err != nil {
				t.Fatal(err)
			}
			req := requested(t, w)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			options := []string{kernel.ConsentAllowOnce, kernel.ConsentDeny}
			for i := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = s.AnswerConsent(context.Background(), kernel.Caller{Client: options[i], Draws: consentClient.Draws}, req.Request, options[i])
				}()
			}
			wg.Wait()
			if (errs[0] == nil) == (errs[1] == nil) {
				t.Fatalf("answers = %v, %v; want exactly one accepted", errs[0], errs[1])
			}
			winner := 0
			if errs[0] != nil {
				winner = 1
			}
			res := resolved(t, w)
			if res.Option != options[winner] {
				t.Errorf("resolved with %q, want the accepted answer %q", res.Option, options[winner])
			}
			w.until(terminal)
			n := 0
			for _, ev := range w.evs {
				if custom(kernel.ConsentResolvedEvent)(ev) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d orrery.consent.resolved events, want 1", n)
			}
			if want := int32(1 - winner); calls.Load() != want {
				t.Errorf("tool ran %d times, want %d", calls.Load(), want)
			}
		})

		t.Run("cancel during consent", func(t *testing.T) {
			var calls atomic.Int32
			_, s := consentEnv(t, mode, &calls)
			w := watch(t, s, consentClient)
			if _, err := s.Send(context.Background(), kernel.SendInput{Text: "go"}); err != nil {
				t.Fatal(err)
			}
			req := requested(t, w)
			if err := s.Cancel(context.Background(), ""); err != nil {
				t.Fatal(err)
			}
			res := resolved(t, w)
			if res.Outcome != kernel.ConsentCancelled {
				t.Errorf("resolved = %+v, want cancelled", res)
			}
			end := w.until(terminal)
			if f, ok := end.(*protocol.RunFinished); !ok || f.Outcome == nil || f.Outcome.Type != protocol.OutcomeCancelled {
				t.Errorf("terminal = %#v, want RUN_FINISHED cancelled", end)
			}
			if err := s.AnswerConsent(context.Background(), consentClient, req.Request, kernel.ConsentAllowOnce); err == nil {
				t.Error("an answer after the cancel was accepted")
			}
			if calls.Load() != 0 {
				t.Error("the tool ran after its run was cancelled")
			}
		})

		t.Run("client disconnects, another answers", func(t *testing.T) {
			var calls atomic.Int32
			_, s := consentEnv(t, mode, &calls)
			w := watch(t, s, consentClient)
			if _, err := s.Send(context.Background(), kernel.SendInput{Text: "go"}); err != nil {
				t.Fatal(err)
			}
			req := requested(t, w)
			w.sub.Close()
			// A client that attaches later sees the question in its snapshot.
			sub, err := s.SubscribeWith(context.Background(), kernel.SubscribeOptions{Caller: consentClient})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			<-sub.Ready()
			snap, err := protocol.DecodeEvent(sub.Take(nil)[0].Data)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(snap.(*protocol.StateSnapshot).Snapshot), "placed:host:consent") {
				t.Fatalf("snapshot %s lacks the pending question", snap.(*protocol.StateSnapshot).Snapshot)
			}
			if err := s.AnswerConsent(context.Background(), consentClient, req.Request, kernel.ConsentAllowOnce); err != nil {
				t.Fatalf("AnswerConsent() = %v", err)
			}
			w2 := &watcher{t: t, sub: sub}
			w2.until(terminal)
			if calls.Load() != 1 {
				t.Errorf("tool ran %d times, want 1", calls.Load())
			}
		})

		t.Run("no answer in time", func(t *testing.T) {
			var calls atomic.Int32
			_, s := consentEnv(t, mode, &calls, func(c *kernel.Config) { c.ConsentTimeout = 50 * time.Millisecond })
			w := watch(t, s, consentClient)
			if _, err := s.Send(context.Background(), kernel.SendInput{Text: "go"}); err != nil {
				t.Fatal(err)
			}
			if res := resolved(t, w); res.Outcome != kernel.ConsentTimedOut {
				t.Errorf("resolved = %+v, want timeout", res)
			}
			w.until(terminal)
			if o := toolOutcome(t, w.evs); o["status"] != "denied" || calls.Load() != 0 {
				t.Errorf("outcome = %v, calls %d; want denied and never run", o, calls.Load())
			}
		})
	})
}
