package kernel

import "testing"

// TestHubAddAfterClose: a subscription closed before the committer came
// round to its registration is not added, so it cannot keep the session
// loaded (an idle session with a subscriber that is gone never unloaded).
func TestHubAddAfterClose(t *testing.T) {
	tests := []struct {
		name      string
		closeIt   bool
		wantCount int
	}{
		{"open subscription is added", false, 1},
		{"closed subscription is not", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h hub
			sub := newSubscription(&h, 0)
			if tt.closeIt {
				sub.Close()
			}
			h.add(sub, nil)
			if got := h.subscribers(); got != tt.wantCount {
				t.Errorf("subscribers() = %d, want %d", got, tt.wantCount)
			}
		})
	}
}
