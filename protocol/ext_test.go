package protocol_test

import (
	"strings"
	"testing"

	"github.com/getorrery/orrery/protocol"
)

func TestDecodeStateWatchRefuses(t *testing.T) {
	_, err := protocol.DecodeRequest([]byte(`{"t":"state.watch","id":"q1","session":"s","keys":"ext:ci/failed"}`))
	if err == nil || !strings.Contains(err.Error(), "field keys is a string but must be an array") {
		t.Errorf("DecodeRequest(state.watch with keys a string) error = %v, want one naming keys", err)
	}
}
