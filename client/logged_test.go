package client_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// kernelEncoded returns data as the kernel encodes the event it holds.
func kernelEncoded(t *testing.T, data string) string {
	t.Helper()
	ev, err := protocol.DecodeEvent([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestFrameLogged: Logged takes off the session tag kernel.TagSession puts
// on, whichever way it was put, and leaves an untagged frame as it is.
func TestFrameLogged(t *testing.T) {
	for _, logged := range []string{
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hel","metadata":{"orrery":{"seq":7}}}`,
		`{"type":"RUN_STARTED","threadId":"s","runId":"r","metadata":{"orrery":{"seq":1,"merged_from":0}}}`,
		// A rawEvent before the metadata makes TagSession decode and encode.
		kernelEncoded(t, `{"type":"RAW","rawEvent":{"metadata":{"orrery":{}}},"event":{},"source":"acp","metadata":{"orrery":{"seq":3}}}`),
	} {
		tagged := kernel.TagSession([]byte(logged), "ses_1")
		if bytes.Equal(tagged, []byte(logged)) {
			t.Fatalf("TagSession(%s) changed nothing", logged)
		}
		f := client.Frame{Session: "ses_1", Data: tagged}
		if got := f.Logged(); string(got) != logged {
			t.Errorf("Frame{Data: %s}.Logged() = %s, want %s", tagged, got, logged)
		}
		if got := (client.Frame{Data: []byte(logged)}).Logged(); string(got) != logged {
			t.Errorf("an untagged frame's Logged() = %s, want it unchanged", got)
		}
	}
}
