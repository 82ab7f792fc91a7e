package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/getorrery/orrery/store"
)

func TestKinds(t *testing.T) {
	var k store.Kinds
	opened := ""
	for _, name := range []string{"b", "a"} {
		k.Register(name, func(_ context.Context, c store.OpenConfig) (store.Log, error) {
			opened = name + ":" + c.Dir
			return nil, nil
		})
	}
	if got := strings.Join(k.Names(), ","); got != "a,b" {
		t.Errorf("Names() = %s, want a,b", got)
	}
	if _, err := k.Open(context.Background(), "a", store.OpenConfig{Dir: "/d"}); err != nil || opened != "a:/d" {
		t.Errorf("Open(a) = %v, opened %q; want nil, a:/d", err, opened)
	}
	_, err := k.Open(context.Background(), "nats", store.OpenConfig{})
	if !errors.Is(err, store.ErrUnknownKind) || !strings.Contains(err.Error(), "one of a, b") {
		t.Errorf("Open(nats) = %v, want %v naming a, b", err, store.ErrUnknownKind)
	}
	defer func() {
		if r := recover(); r == nil {
			t.Errorf("Register(a) twice did not panic")
		}
	}()
	k.Register("a", func(context.Context, store.OpenConfig) (store.Log, error) { return nil, nil })
}
