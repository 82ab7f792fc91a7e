package server

import (
	"github.com/getorrery/orrery/dialect"
	"github.com/getorrery/orrery/kernel"
)

// encoderFor returns the encoder of a stream_mode value (nil for
// agui_spec), or an error that lists the valid modes.
func encoderFor(mode string) (kernel.Encoder, error) {
	m, err := dialect.ParseMode(mode)
	if err != nil {
		return nil, err
	}
	return dialect.Encoder(m, dialect.Options{}), nil
}
