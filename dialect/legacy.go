package dialect

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/getorrery/orrery/kernel"
)

// legacyEncoder writes the deprecated lower-case vocabulary: each frame
// becomes one flat object whose type is "agui." and the AG-UI type in lower
// case (TEXT_MESSAGE_CONTENT → agui.text_message_content), with the seq at
// top level, the event's own fields beside it, and the rest of
// metadata.orrery (session, merged_from, result, outcome) under "orrery".
// Other metadata keys stay under "metadata". A frame that is not a JSON
// object becomes agui.unknown with the bytes under "frame" when they are
// JSON, so nothing is interpreted.
type legacyEncoder struct{}

var _ kernel.Encoder = legacyEncoder{}

func (legacyEncoder) Name() string { return string(AGUI) }

// LegacyType returns the legacy name of an AG-UI event type.
func LegacyType(t string) string { return "agui." + strings.ToLower(t) }

func (legacyEncoder) Encode(dst []kernel.Frame, f kernel.Frame) []kernel.Frame {
	return append(dst, kernel.Frame{Seq: f.Seq, Type: f.Type, Run: f.Run, Data: legacyEvent(f)})
}

func legacyEvent(f kernel.Frame) []byte {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(f.Data, &fields); err != nil || fields == nil {
		var b bytes.Buffer
		b.WriteString(`{"type":"agui.unknown","seq":`)
		b.WriteString(strconv.FormatUint(f.Seq, 10))
		if json.Valid(f.Data) {
			b.WriteString(`,"frame":`)
			b.Write(f.Data)
		}
		b.WriteByte('}')
		return b.Bytes()
	}
	var typ string
	_ = json.Unmarshal(fields["type"], &typ)
	meta, extra := splitMetadata(fields["metadata"])
	delete(fields, "type")
	delete(fields, "metadata")

	var b bytes.Buffer
	b.WriteString(`{"type":`)
	writeString(&b, LegacyType(typ))
	b.WriteString(`,"seq":`)
	b.WriteString(strconv.FormatUint(f.Seq, 10))
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteByte(',')
		writeString(&b, k)
		b.WriteByte(':')
		b.Write(fields[k])
	}
	if len(meta) > 0 {
		b.WriteString(`,"orrery":`)
		writeObject(&b, meta)
	}
	if len(extra) > 0 {
		b.WriteString(`,"metadata":`)
		writeObject(&b, extra)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// splitMetadata returns metadata.orrery without its seq, and the other
// metadata keys.
func splitMetadata(raw json.RawMessage) (orrery, extra map[string]json.RawMessage) {
	if len(raw) == 0 {
		return nil, nil
	}
	var md map[string]json.RawMessage
	if json.Unmarshal(raw, &md) != nil {
		return nil, nil
	}
	if o, ok := md["orrery"]; ok {
		if json.Unmarshal(o, &orrery) == nil {
			delete(orrery, "seq")
		}
		delete(md, "orrery")
	}
	return orrery, md
}

func writeString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s)
	b.Write(q)
}

// writeObject writes m with its keys sorted.
func writeObject(b *bytes.Buffer, m map[string]json.RawMessage) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, k)
		b.WriteByte(':')
		b.Write(m[k])
	}
	b.WriteByte('}')
}
