package bench_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// stepsPerRun is how many model steps each benchmark run makes: a run's
// conversation grows with every step, so long runs would measure the
// transcript's size rather than one step.
const stepsPerRun = 20

// stepper is a provider with zero delay: each call but the last of a run
// calls echo; the last answers in text. With toolCalls off it streams five
// text deltas instead, the same number of frames as a tool step.
type stepper struct {
	toolCalls bool
	calls     atomic.Int64
}

func (s *stepper) Name() string  { return "bench" }
func (s *stepper) Model() string { return "stepper" }
func (s *stepper) Stream(ctx context.Context, req agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	n := s.calls.Add(1)
	if n%stepsPerRun == 0 {
		return agent.Usage{}, emit(agent.Delta{Kind: agent.DeltaText, Text: "done"})
	}
	if !s.toolCalls {
		for range 5 {
			if err := emit(agent.Delta{Kind: agent.DeltaText, Text: "tok "}); err != nil {
				return agent.Usage{}, err
			}
		}
		return agent.Usage{}, nil
	}
	if err := emit(agent.Delta{Kind: agent.DeltaToolCall, ToolName: "echo"}); err != nil {
		return agent.Usage{}, err
	}
	return agent.Usage{}, emit(agent.Delta{Kind: agent.DeltaToolArgs, Text: `{"text":"x"}`})
}

// runSteps runs b.N model steps, stepsPerRun per run, and waits for each
// run's terminal frame.
func runSteps(b *testing.B, p *stepper) {
	r := newRig(b, p)
	ctx := context.Background()
	runs := max(1, b.N/stepsPerRun)
	b.ReportAllocs()
	b.ResetTimer()
	var frames []kernel.Frame
	for range runs {
		// A session per run: each step snapshots the conversation, so one
		// long session would measure its length, not the step.
		s, err := r.k.CreateSession(ctx, kernel.SessionOptions{})
		if err != nil {
			b.Fatal(err)
		}
		res, err := s.Send(ctx, kernel.SendInput{Text: "go", Subscribe: true})
		if err != nil {
			b.Fatal(err)
		}
		for done := false; !done; {
			<-res.Sub.Ready()
			frames = res.Sub.Take(frames[:0])
			for _, fr := range frames {
				if protocol.EventType(fr.Type).Terminal() {
					done = true
				}
			}
		}
		res.Sub.Close()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(runs*stepsPerRun), "ns/step")
}

// BenchmarkLoopStep measures the agent loop's own overhead per model step:
// a zero-delay model that calls echo every step, so each step is a model
// call, a transcript snapshot, argument checking against the tool's schema,
// the consent gate, the tool, and five frames (TOOL_CALL_START/ARGS/END,
// TOOL_CALL_RESULT, the result's STATE_DELTA) sequenced, committed and
// published.
func BenchmarkLoopStep(b *testing.B) { runSteps(b, &stepper{toolCalls: true}) }

// BenchmarkLoopStepBaseline is the same number of steps and frames with no
// tool: each step streams five text deltas. The ratio of the two is what
// a tool call costs beyond its frames.
func BenchmarkLoopStepBaseline(b *testing.B) { runSteps(b, &stepper{}) }
