// Package dialect holds the faces of a session's log: encoders that turn
// frames as the kernel logs them (AG-UI 1.0 JSON with metadata.orrery) into
// the wire form a client asked for with stream_mode. Every encoder is
// stateless, so the kernel's hub encodes each frame once per mode and shares
// the bytes, and every mode carries the frame's seq, so a client resumes
// with since in any of them.
//
// The modes:
//   - agui_spec: the frames as logged (the default);
//   - agui: the deprecated lower-case agui.* vocabulary (legacy.go);
//   - openai: chat.completion.chunk objects with Orrery extensions (openai.go);
//   - dual: OpenAI chunks plus the legacy events, as a migration aid.
//
// The subpackage dialect/a2ui projects components and surfaces to A2UI.
package dialect

import (
	"fmt"
	"strings"

	"github.com/getorrery/orrery/kernel"
)

// Mode names a stream mode, the value of stream_mode.
type Mode string

// The stream modes.
const (
	// AGUISpec is AG-UI 1.0 as logged, the default.
	AGUISpec Mode = "agui_spec"
	// AGUI is the deprecated lower-case agui.* vocabulary.
	AGUI Mode = "agui"
	// OpenAI is chat.completion.chunk objects with Orrery's extensions.
	OpenAI Mode = "openai"
	// Dual is OpenAI chunks followed by the legacy events.
	Dual Mode = "dual"
)

// Modes returns every mode, the default first.
func Modes() []Mode { return []Mode{AGUISpec, AGUI, OpenAI, Dual} }

// ParseMode reads a stream_mode value; "" is the default, agui_spec. An
// unknown value is refused with an error that lists the valid ones.
func ParseMode(v string) (Mode, error) {
	if v == "" {
		return AGUISpec, nil
	}
	for _, m := range Modes() {
		if string(m) == v {
			return m, nil
		}
	}
	names := make([]string, 0, 4)
	for _, m := range Modes() {
		names = append(names, string(m))
	}
	return "", fmt.Errorf("unknown stream_mode %q: use one of %s (agui_spec is the default)", v, strings.Join(names, ", "))
}

// Options tune an encoder.
type Options struct {
	// Model is the model name OpenAI chunks carry; "" means "orrery".
	Model string
}

// Encoder returns the kernel encoder of mode, or nil for agui_spec, whose
// frames go out as logged.
func Encoder(mode Mode, opts Options) kernel.Encoder {
	if opts.Model == "" {
		opts.Model = "orrery"
	}
	switch mode {
	case AGUI:
		return legacyEncoder{}
	case OpenAI:
		return openAIEncoder{model: opts.Model}
	case Dual:
		return dualEncoder{openai: openAIEncoder{model: opts.Model}}
	}
	return nil
}

// dualEncoder writes, for each frame, its OpenAI chat chunk when it has one,
// then its legacy event.
type dualEncoder struct {
	openai openAIEncoder
}

var _ kernel.Encoder = dualEncoder{}

func (e dualEncoder) Name() string { return string(Dual) + ":" + e.openai.model }

func (e dualEncoder) Encode(dst []kernel.Frame, f kernel.Frame) []kernel.Frame {
	if chunk, ok := e.openai.chatChunk(f); ok {
		dst = append(dst, kernel.Frame{Seq: f.Seq, Run: f.Run, Data: chunk})
	}
	return legacyEncoder{}.Encode(dst, f)
}
