package kernel

import (
	"encoding/json"

	"github.com/getorrery/orrery/protocol"
)

// steer adds a person's message to the run in flight. The loop reads it at
// its next model step; if the loop was about to finish, it takes one more
// step instead. Runs on the actor.
func (s *Session) steer(r *run, msg protocol.Message) error {
	s.assertActor()
	value, err := json.Marshal(UserMessage{ID: msg.ID, Role: protocol.RoleUser, Content: msg.Content, RunID: r.id, Steer: true})
	if err != nil {
		return err
	}
	if err := s.emit(r.id, &protocol.Custom{Name: UserMessageEvent, Value: value}); err != nil {
		return err
	}
	r.steers++
	return nil
}
