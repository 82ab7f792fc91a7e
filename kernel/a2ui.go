package kernel

import (
	"encoding/json"
	"fmt"

	"github.com/getorrery/orrery/dialect/a2ui"
	"github.com/getorrery/orrery/ui"
)

// liftA2UI checks the a2ui form of ui.show (a list of A2UI v0.9 messages
// for one surface) strictly and returns the orrery surface every client
// draws, and the messages the A2UI face sends, their surfaceId set to the
// placed node (placed:<owner>:<id>) so that actions come back to it.
func liftA2UI(owner ui.Owner, id string, form json.RawMessage) (surface, ops json.RawMessage, err error) {
	msgs, err := a2ui.Validate(form)
	if err != nil {
		return nil, nil, err
	}
	surfaces, err := a2ui.Lift(msgs)
	if err != nil {
		return nil, nil, err
	}
	if len(surfaces) != 1 {
		return nil, nil, fmt.Errorf("the a2ui form builds %d surfaces: ui.show places one, so send the messages of one surfaceId (and createSurface it)", len(surfaces))
	}
	node := ui.NodeID(owner, id)
	for i := range msgs {
		switch m := &msgs[i]; {
		case m.CreateSurface != nil:
			m.CreateSurface.SurfaceID = node
		case m.UpdateComponents != nil:
			m.UpdateComponents.SurfaceID = node
		case m.UpdateDataModel != nil:
			m.UpdateDataModel.SurfaceID = node
		case m.DeleteSurface != nil:
			m.DeleteSurface.SurfaceID = node
		}
	}
	if ops, err = json.Marshal(msgs); err != nil {
		return nil, nil, fmt.Errorf("encode a2ui form: %w", err)
	}
	for _, s := range surfaces {
		surface = s
	}
	return surface, ops, nil
}
