package dialect

import (
	"encoding/json"

	"github.com/getorrery/orrery/kernel"
)

// ForAGUI0 wraps inner for AG-UI 0.0.x clients (a RunAgentInput without
// protocolVersion; CopilotKit 1.x pins @ag-ui/client 0.0.59), whose schema
// knows only two RUN_FINISHED outcomes, {type: "success"} with nothing
// else and {type: "interrupt", interrupts}, and refuses the whole run on
// any other. So a run that ends waiting for the client's tool calls ends
// with {type: "success"} and the calls in metadata.orrery
// .pendingToolCallIds, and a cancelled run with no outcome and
// metadata.orrery.cancelled true. Every other frame is inner's (a nil
// inner: the frame as it is).
func ForAGUI0(inner kernel.Encoder) kernel.Encoder {
	if se, ok := inner.(kernel.StateEncoder); ok {
		return agui0State{agui0{inner}, se}
	}
	return agui0{inner}
}

type agui0 struct{ inner kernel.Encoder }

func (e agui0) Name() string {
	if e.inner == nil {
		return "agui0"
	}
	return e.inner.Name() + "+agui0"
}

func (e agui0) Encode(dst []kernel.Frame, f kernel.Frame) []kernel.Frame {
	from := len(dst)
	if e.inner == nil {
		return agui0Outcomes(from, append(dst, kernel.Frame{Seq: f.Seq, Type: f.Type, Run: f.Run, Data: append([]byte(nil), f.Data...)}))
	}
	return agui0Outcomes(from, e.inner.Encode(dst, f))
}

type agui0State struct {
	agui0
	state kernel.StateEncoder
}

var _ kernel.StateEncoder = agui0State{}

func (e agui0State) EncodeState(dst []kernel.Frame, f kernel.Frame, state []byte) []kernel.Frame {
	return agui0Outcomes(len(dst), e.state.EncodeState(dst, f, state))
}

// agui0Outcomes rewrites the RUN_FINISHED frames out[from:] as ForAGUI0
// says.
func agui0Outcomes(from int, out []kernel.Frame) []kernel.Frame {
	for i := from; i < len(out); i++ {
		if out[i].Type != "RUN_FINISHED" {
			continue
		}
		if data, ok := agui0Finished(out[i].Data); ok {
			out[i].Data = data
		}
	}
	return out
}

// agui0Finished is a RUN_FINISHED with its outcome in 0.0.x's terms, or
// false when it needs no change.
func agui0Finished(data []byte) ([]byte, bool) {
	var ev, outcome map[string]json.RawMessage
	if json.Unmarshal(data, &ev) != nil || json.Unmarshal(ev["outcome"], &outcome) != nil || outcome == nil {
		return nil, false
	}
	var typ string
	_ = json.Unmarshal(outcome["type"], &typ)
	var key string // of metadata.orrery that carries what the outcome loses
	var value json.RawMessage
	switch {
	case typ == "interrupt", typ == "success" && len(outcome) == 1:
		return nil, false
	case typ == "success":
		ev["outcome"] = json.RawMessage(`{"type":"success"}`)
		key, value = "pendingToolCallIds", outcome["pendingToolCallIds"]
	default:
		delete(ev, "outcome")
		key, value = typ, json.RawMessage("true")
	}
	if v := string(value); v != "" && v != "null" && v != "[]" {
		var meta, orrery map[string]json.RawMessage
		_ = json.Unmarshal(ev["metadata"], &meta)
		_ = json.Unmarshal(meta["orrery"], &orrery)
		if meta == nil {
			meta = map[string]json.RawMessage{}
		}
		if orrery == nil {
			orrery = map[string]json.RawMessage{}
		}
		orrery[key] = value
		meta["orrery"], _ = json.Marshal(orrery)
		ev["metadata"], _ = json.Marshal(meta)
	}
	out, err := json.Marshal(ev)
	if err != nil {
		return nil, false
	}
	return out, true
}
