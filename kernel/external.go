package kernel

import (
	"context"
	"fmt"

	"github.com/getorrery/orrery/protocol"
)

// Append sequences events that an external agent sent outside any turn of
// its own, such as an ACP agent's update after its turn's result. Only RAW
// and CUSTOM events are taken; they belong to the run in flight, if any.
func (s *Session) Append(ctx context.Context, events ...protocol.Event) error {
	for _, ev := range events {
		switch protocol.Stamp(ev).EventType() {
		case protocol.TypeRaw, protocol.TypeCustom:
		default:
			return &RequestError{Msg: fmt.Sprintf("%s cannot be appended outside a run: append RAW or CUSTOM events only", ev.EventType())}
		}
	}
	var err error
	if derr := s.do(ctx, func() { err = s.emit(s.runID(), events...) }); derr != nil {
		return derr
	}
	return err
}
