package protocol_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/getorrery/orrery/protocol"
)

// eventSeeds are frames as Orrery and other AG-UI 1.0 producers write them.
var eventSeeds = []string{
	`{"type":"RUN_STARTED","threadId":"t1","runId":"r1","metadata":{"orrery":{"seq":1}}}`,
	`{"type":"RUN_STARTED","threadId":"t1","runId":"r1","input":{"threadId":"t1","runId":"r1","messages":[{"id":"u1","role":"user","content":"Hello"}],"tools":[],"context":[]}}`,
	`{"type":"STATE_SNAPSHOT","snapshot":{"ui":{"nodes":{}},"surfaces":{}},"metadata":{"orrery":{"seq":2}}}`,
	`{"type":"STATE_SNAPSHOT","snapshot":null}`,
	`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/data","value":null},{"op":"move","from":"/a","path":"/b"}]}`,
	`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant","metadata":{"orrery":{"seq":3}}}`,
	`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hel","metadata":{"orrery":{"seq":4,"merged_from":3},"other":[1,2]}}`,
	`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":""}`,
	`{"type":"TEXT_MESSAGE_END","messageId":"m1","timestamp":1767225600000}`,
	`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m2","delta":"lo","subagentRunId":"s1"}`,
	`{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"search","parentMessageId":"m1"}`,
	`{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"q\":"}`,
	`{"type":"TOOL_CALL_END","toolCallId":"c1"}`,
	`{"type":"TOOL_CALL_CHUNK","toolCallId":"c2","toolCallName":"f","delta":"{}"}`,
	`{"type":"TOOL_CALL_RESULT","messageId":"tm1","toolCallId":"c1","content":"found","role":"tool","metadata":{"orrery":{"seq":9,"outcome":{"surface":"table"}}}}`,
	`{"type":"TOOL_CALL_RESULT","messageId":"tm1","toolCallId":"c1","content":[{"type":"text","text":""},{"type":"image","source":{"type":"data","value":"aGk=","mimeType":"image/png"}}]}`,
	`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}]},{"id":"m1","role":"assistant","toolCalls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"id":"a1","role":"activity","activityType":"plan","content":{"steps":[]}}],"metadata":{"orrery":{"seq":0}}}`,
	`{"type":"ACTIVITY_SNAPSHOT","messageId":"a1","activityType":"plan","content":{"steps":["a"]},"replace":false}`,
	`{"type":"ACTIVITY_DELTA","messageId":"a1","activityType":"plan","patch":[{"op":"replace","path":"/steps/0","value":"b"}]}`,
	`{"type":"RAW","event":{"kind":"x"},"source":"acp","rawEvent":[1]}`,
	`{"type":"CUSTOM","name":"orrery.notice","value":{"ext":"e","level":"info","text":"hi"}}`,
	`{"type":"CUSTOM","name":"orrery.user.message","value":null}`,
	`{"type":"RUN_FINISHED","threadId":"t1","runId":"r1","result":{"micro_usd":12,"inputTokens":10,"outputTokens":5},"usage":[{"provider":"openai","inputTokens":10}]}`,
	`{"type":"RUN_FINISHED","threadId":"t1","runId":"r1","outcome":{"type":"interrupt","interrupts":[{"id":"i1","reason":"consent","responseSchema":{"type":"object"}}]}}`,
	`{"type":"RUN_FINISHED","threadId":"t1","runId":"r1","outcome":{"type":"cancelled"}}`,
	`{"type":"RUN_ERROR","message":"provider failed","code":"provider","metadata":{"orrery":{"seq":20,"result":{"micro_usd":3,"inputTokens":1,"outputTokens":0}}}}`,
	`{"type":"STEP_STARTED","stepName":"plan"}`,
	`{"type":"STEP_FINISHED","stepName":"plan"}`,
	`{"type":"REASONING_START","messageId":"rs1"}`,
	`{"type":"REASONING_MESSAGE_START","messageId":"rm1","role":"reasoning"}`,
	`{"type":"REASONING_MESSAGE_CONTENT","messageId":"rm1","delta":"hmm"}`,
	`{"type":"REASONING_MESSAGE_END","messageId":"rm1"}`,
	`{"type":"REASONING_MESSAGE_CHUNK","messageId":"rm2","delta":"x"}`,
	`{"type":"REASONING_END","messageId":"rs1"}`,
	`{"type":"REASONING_ENCRYPTED_VALUE","subtype":"tool-call","entityId":"c1","encryptedValue":"b64"}`,
	`{"type":"SUBAGENT_STARTED","subagentRunId":"s1","name":"researcher","parentToolCallId":"c1"}`,
	`{"type":"SUBAGENT_FINISHED","subagentRunId":"s1","outcome":{"type":"suspended","interruptIds":["i1"]}}`,
	`{"type":"SUBAGENT_ERROR","subagentRunId":"s1","message":"gave up"}`,
	`{"type":"THINKING_START"}`,
	`{"type":"RUN_ERROR","message":"x","metadata":null,"rawEvent":null}`,
	`{"type":"TEXT_MESSAGE_CONTENT" , "messageId" : "m1", "delta":"a\u2028<b>&", "metadata": { "orrery" : { "seq" : 7 } } }`,
}

// FuzzDecodeEvent checks that DecodeEvent never panics and that an event it
// accepts re-encodes to a fixed point: its JSON decodes to an event of the
// same type whose JSON is byte for byte the same.
func FuzzDecodeEvent(f *testing.F) {
	for _, s := range eventSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := protocol.DecodeEvent(data)
		if err != nil {
			return
		}
		if ev.EventType() != ev.Header().Type || protocol.NewEvent(ev.EventType()) == nil {
			t.Fatalf("DecodeEvent(%q) type = %q, want an AG-UI 1.0 type", data, ev.EventType())
		}
		first, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("json.Marshal(DecodeEvent(%q)) error = %v", data, err)
		}
		again, err := protocol.DecodeEvent(first)
		if err != nil {
			t.Fatalf("DecodeEvent(%s) error = %v, want the re-encoded event to decode", first, err)
		}
		if reflect.TypeOf(again) != reflect.TypeOf(ev) {
			t.Fatalf("DecodeEvent(%s) = %T, want %T", first, again, ev)
		}
		second, err := json.Marshal(again)
		if err != nil {
			t.Fatalf("json.Marshal(%T) error = %v", again, err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("json.Marshal(DecodeEvent(%s)) = %s, want it unchanged", first, second)
		}
	})
}

// FuzzDecodeRequest checks that DecodeRequest never panics and that a
// request it accepts re-encodes to a fixed point.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"t":"session.new","id":"q1","cwd":"/work","title":"Plan","model":"gpt"}`,
		`{"t":"session.list","id":"q2"}`,
		`{"t":"session.read","id":"q3","session":"s1","since":0,"limit":100}`,
		`{"t":"session.read","id":"q3","session":"s1"}`,
		`{"t":"run.send","id":"q4","session":"s1","input":{"text":"Hello","attachments":[{"type":"image","source":{"type":"url","value":"https://x/y.png"}}]}}`,
		`{"t":"run.send","id":"q5","session":"s1","input":{"text":"also this"},"target":"steer"}`,
		`{"t":"run.cancel","id":"q6","session":"s1","runId":"r1"}`,
		`{"t":"reply","reqId":"q1","ok":true}`,
		`{"id":"q7"}`,
		`{"t":"session.read","id":"q8","session":"s1","since":-1}`,
		`{"t":"ui.intent","id":"q9","session":"s1","node":"placed:agent:todo","action":"pick","value": [ "row-3" , {"a" :null}]}`,
		`{"t":"ui.intent","id":"q10","session":"s1","node":"placed:ext:ci:runs","action":"open","value":"https://x/y"}`,
		`{"t":"workspace.files","id":"q11","session":"s1","prefix":"src/ma","limit":20}`,
		`{"t":"workspace.files","id":"q13","session":"s1","query":"srvconn","limit":20}`,
		`{"t":"run.send","id":"q12","session":"s1","input":{"text":"see @notes.txt","attachments":[{"type":"document","source":{"type":"path","value":"notes.txt"}}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := protocol.DecodeRequest(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("DecodeRequest(%q) error is empty, want a sentence", data)
			}
			return
		}
		first, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("json.Marshal(DecodeRequest(%q)) error = %v", data, err)
		}
		again, err := protocol.DecodeRequest(first)
		if err != nil {
			t.Fatalf("DecodeRequest(%s) error = %v, want the re-encoded request to decode", first, err)
		}
		if reflect.TypeOf(again) != reflect.TypeOf(req) {
			t.Fatalf("DecodeRequest(%s) = %T, want %T", first, again, req)
		}
		second, err := json.Marshal(again)
		if err != nil {
			t.Fatalf("json.Marshal(%T) error = %v", again, err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("json.Marshal(DecodeRequest(%s)) = %s, want it unchanged", first, second)
		}
	})
}

// FuzzDecodeRunAgentInput checks that DecodeRunAgentInput never panics and
// that an input it accepts, echoed as RUN_STARTED.input, is accepted again
// and re-encodes to a fixed point.
func FuzzDecodeRunAgentInput(f *testing.F) {
	for _, s := range []string{
		clientBody,
		`{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user","content":[{"type":"text","text":"Look"},{"type":"image","source":{"type":"data","value":"aGk=","mimeType":"image/png"}}]}]}`,
		`{"threadId":"t","runId":"r","messages":[{"id":"m1","role":"assistant","content":"Hi","metadata":{"orrery":{"seq":14}},"toolCalls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"},"metadata":{"orrery":{"seq":12}}}]},{"id":"tm1","role":"tool","toolCallId":"c1","content":"ok","error":"e"}]}`,
		`{"threadId":"t","runId":"r","messages":[{"id":"d1","role":"developer","content":"Be brief"},{"id":"r1","role":"reasoning","content":"hmm","encryptedValue":"x"},{"id":"a1","role":"activity","activityType":"plan","content":{}}],"state":null}`,
		`{"threadId":"t","runId":"r","parentRunId":"r0","tools":[{"name":"search","description":"d","parameters":{"type":"object"}}],"context":[{"description":"cwd","value":"/"}],"resume":[{"interruptId":"i1","status":"cancelled"}],"unknown":1}`,
		`{"threadId":"t"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := protocol.DecodeRunAgentInput(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("DecodeRunAgentInput(%q) error is empty, want a sentence", data)
			}
			return
		}
		if in.Messages == nil || in.Tools == nil || in.Context == nil {
			t.Fatalf("DecodeRunAgentInput(%q) has a nil list, want messages, tools and context non-nil", data)
		}
		first, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("json.Marshal(DecodeRunAgentInput(%q)) error = %v", data, err)
		}
		again, err := protocol.DecodeRunAgentInput(first)
		if err != nil {
			t.Fatalf("DecodeRunAgentInput(%s) error = %v, want the echoed input accepted", first, err)
		}
		second, err := json.Marshal(again)
		if err != nil {
			t.Fatalf("json.Marshal(%+v) error = %v", again, err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("json.Marshal(DecodeRunAgentInput(%s)) = %s, want it unchanged", first, second)
		}
	})
}
