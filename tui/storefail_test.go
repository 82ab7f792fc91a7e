package tui_test

import (
	"strings"
	"testing"

	"github.com/getorrery/orrery/client"
)

// TestUnloggedRunErrorEndsRun feeds the TUI the end of a run whose store
// failed, as the kernel delivers it: TEXT_MESSAGE_END and RUN_ERROR with
// seq 0. The run is over and the error shows.
func TestUnloggedRunErrorEndsRun(t *testing.T) {
	run := []client.Frame{
		{Seq: 1, Data: []byte(`{"type":"RUN_STARTED","threadId":"s","runId":"r","metadata":{"orrery":{"seq":1}}}`)},
		{Seq: 2, Data: []byte(`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant","metadata":{"orrery":{"seq":2}}}`)},
		{Seq: 3, Data: []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"half an answer","metadata":{"orrery":{"seq":3}}}`)},
	}
	if _, screen := draw(t, run, 100, 20); !strings.Contains(screen, "running") {
		t.Fatalf("mid-run screen:\n%s\nwant the status to say running", screen)
	}
	end := append(run,
		client.Frame{Data: []byte(`{"type":"TEXT_MESSAGE_END","messageId":"m","metadata":{"orrery":{"seq":0}}}`)},
		client.Frame{Data: []byte(`{"type":"RUN_ERROR","code":"store_failed","message":"this run's output could not be saved (disk full): free disk space, then send the prompt again","metadata":{"orrery":{"seq":0}}}`)},
	)
	_, screen := draw(t, end, 100, 20)
	if strings.Contains(screen, "running") || !strings.Contains(screen, "idle") {
		t.Errorf("screen after a seq-0 RUN_ERROR:\n%s\nwant the status idle", screen)
	}
	if !strings.Contains(screen, "could not be saved") {
		t.Errorf("screen after a seq-0 RUN_ERROR:\n%s\nwant the error shown", screen)
	}
}
