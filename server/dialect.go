package server

import (
	"github.com/getorrery/orrery/dialect"
	"github.com/getorrery/orrery/kernel"
)

// encoderFor returns the encoder of a stream_mode value (nil for
// agui_spec frames as logged), with the A2UI face added when withA2UI is
// set, or an error that lists the valid modes.
func encoderFor(mode string, withA2UI bool) (kernel.Encoder, error) {
	m, err := dialect.ParseMode(mode)
	if err != nil {
		return nil, err
	}
	enc := dialect.Encoder(m, dialect.Options{})
	if withA2UI {
		enc = dialect.WithA2UI(enc)
	}
	return enc, nil
}
