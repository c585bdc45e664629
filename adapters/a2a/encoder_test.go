package a2a_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/a2a"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/codec"
)

type frame struct{ id, data string }

func frames(t *testing.T, b []byte) []frame {
	t.Helper()
	d := sse.NewDecoder(bytes.NewReader(b))
	var out []frame
	for {
		f, err := d.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, frame{f.ID, string(f.Data)})
	}
}

var turn = [][]codec.Part{
	{{Kind: codec.Start, ID: 1}},
	{{Kind: codec.Text, ID: 2, Text: "Hel"}},
	{{Kind: codec.Text, ID: 3, Text: "lo"}},
	{{Kind: codec.ToolInputStart, ID: 4, ToolCallID: "c1", ToolName: "read", Title: "Read a.go"},
		{Kind: codec.ToolInput, ID: 4, ToolCallID: "c1", Input: json.RawMessage(`{"path":"a.go"}`)}},
	{{Kind: codec.ToolOutput, ID: 5, ToolCallID: "c1", Output: json.RawMessage(`"package a"`)}},
	{{Kind: codec.Data, ID: 6, Name: "note", Data: json.RawMessage(`"hi"`)}},
}

func encode(o a2a.Options, reason string) []frame {
	enc := a2a.NewEncoder(o)
	b := enc.Task(nil, 0)
	for _, ps := range turn {
		b = enc.Append(b, ps...)
	}
	return frames(&testing.T{}, enc.Finish(b, 7, reason, "quota"))
}

func TestEncoderV1(t *testing.T) {
	t.Parallel()
	got := encode(a2a.Options{RequestID: json.RawMessage(`1`), TaskID: "t1", ContextID: "s1", Epoch: "ep"}, codec.ReasonComplete)
	r := `{"jsonrpc":"2.0","id":1,"result":`
	assert.Equal(t, []frame{
		{"", r + `{"task":{"contextId":"s1","id":"t1","status":{"state":"TASK_STATE_SUBMITTED"}}}}`},
		{"ep-1", r + `{"statusUpdate":{"contextId":"s1","status":{"state":"TASK_STATE_WORKING"},"taskId":"t1"}}}`},
		{"ep-2", r + `{"artifactUpdate":{"append":false,"artifact":{"artifactId":"text-2","name":"text","parts":[{"text":"Hel"}]},"contextId":"s1","lastChunk":false,"taskId":"t1"}}}`},
		{"ep-3", r + `{"artifactUpdate":{"append":true,"artifact":{"artifactId":"text-2","name":"text","parts":[{"text":"lo"}]},"contextId":"s1","lastChunk":false,"taskId":"t1"}}}`},
		{"ep-4:0", r + `{"artifactUpdate":{"append":false,"artifact":{"artifactId":"tool-c1","name":"Read a.go","parts":[{"data":{"title":"Read a.go","toolCallId":"c1","toolName":"read"},"mediaType":"application/json"}]},"contextId":"s1","lastChunk":false,"taskId":"t1"}}}`},
		{"ep-4", r + `{"artifactUpdate":{"append":true,"artifact":{"artifactId":"tool-c1","name":"Read a.go","parts":[{"data":{"input":{"path":"a.go"},"toolCallId":"c1"},"mediaType":"application/json"}]},"contextId":"s1","lastChunk":false,"taskId":"t1"}}}`},
		{"ep-5", r + `{"artifactUpdate":{"append":true,"artifact":{"artifactId":"tool-c1","name":"Read a.go","parts":[{"data":{"output":"package a","preliminary":false,"toolCallId":"c1"},"mediaType":"application/json"}]},"contextId":"s1","lastChunk":false,"taskId":"t1"}}}`},
		{"ep-6", r + `{"statusUpdate":{"contextId":"s1","metadata":{"type":"note"},"status":{"message":{"contextId":"s1","messageId":"event-6","parts":[{"data":"hi","mediaType":"application/json"}],"role":"ROLE_AGENT","taskId":"t1"},"state":"TASK_STATE_WORKING"},"taskId":"t1"}}}`},
		{"ep-7", r + `{"statusUpdate":{"contextId":"s1","status":{"state":"TASK_STATE_COMPLETED"},"taskId":"t1"}}}`},
	}, got)
}

func TestEncoderV03(t *testing.T) {
	t.Parallel()
	got := encode(a2a.Options{Version: a2a.V03, RequestID: json.RawMessage(`"r-9"`), TaskID: "t1", ContextID: "s1"}, codec.ReasonError)
	r := `{"jsonrpc":"2.0","id":"r-9","result":`
	require.Len(t, got, 9)
	assert.Equal(t, frame{"", r + `{"contextId":"s1","id":"t1","kind":"task","status":{"state":"submitted"}}}`}, got[0])
	assert.Equal(t, frame{"1", r + `{"contextId":"s1","final":false,"kind":"status-update","status":{"state":"working"},"taskId":"t1"}}`}, got[1])
	assert.Equal(t, frame{"2", r + `{"append":false,"artifact":{"artifactId":"text-2","name":"text","parts":[{"kind":"text","text":"Hel"}]},"contextId":"s1","kind":"artifact-update","lastChunk":false,"taskId":"t1"}}`}, got[2])
	assert.Equal(t, frame{"6", r + `{"contextId":"s1","final":false,"kind":"status-update","metadata":{"type":"note"},"status":{"message":{"contextId":"s1","kind":"message","messageId":"event-6","parts":[{"data":{"value":"hi"},"kind":"data"}],"role":"agent","taskId":"t1"},"state":"working"},"taskId":"t1"}}`}, got[7])
	assert.Equal(t, frame{"7", r + `{"contextId":"s1","final":true,"kind":"status-update","status":{"message":{"contextId":"s1","kind":"message","messageId":"t1-status","parts":[{"kind":"text","text":"quota"}],"role":"agent","taskId":"t1"},"state":"failed"},"taskId":"t1"}}`}, got[8])
}

// A resubscribe primed with the turn so far sends the task as it stands
// first — its text merged into one part per artifact — then the rest.
func TestTaskAfterPriming(t *testing.T) {
	t.Parallel()
	enc := a2a.NewEncoder(a2a.Options{RequestID: json.RawMessage(`2`), TaskID: "t1", ContextID: "s1"})
	enc.Skip(-1)
	for _, ps := range turn[:5] {
		require.Empty(t, enc.Append(nil, ps...))
	}
	enc.Skip(0)
	got := frames(t, enc.Task(nil, 5))
	require.Len(t, got, 1)
	assert.Equal(t, "5", got[0].id)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":2,"result":{"task":{"id":"t1","contextId":"s1","status":{"state":"TASK_STATE_WORKING"},"artifacts":[
		{"artifactId":"text-2","name":"text","parts":[{"text":"Hello"}]},
		{"artifactId":"tool-c1","name":"Read a.go","parts":[
			{"data":{"toolCallId":"c1","toolName":"read","title":"Read a.go"},"mediaType":"application/json"},
			{"data":{"toolCallId":"c1","input":{"path":"a.go"}},"mediaType":"application/json"},
			{"data":{"toolCallId":"c1","output":"package a","preliminary":false},"mediaType":"application/json"}]}]}}}`, got[0].data)
	assert.Equal(t, a2a.StateWorking, enc.State())
	b := enc.Finish(nil, 8, codec.ReasonCancelled, "")
	assert.Contains(t, string(b), `"TASK_STATE_CANCELED"`)
	assert.True(t, enc.Done())
	assert.Empty(t, enc.Append(nil, codec.Part{Kind: codec.Text, ID: 9, Text: "late"}), "nothing after the end")
}

func TestParseRequest(t *testing.T) {
	t.Parallel()
	rows := []struct {
		body string
		want a2a.Request
		code int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"},{"text":" there"}]}}}`,
			a2a.Request{ID: json.RawMessage(`1`), Method: a2a.MethodStream, Version: a2a.V1, MessageID: "m1", Text: "hi there"}, 0},
		{`{"jsonrpc":"2.0","id":"x","method":"message/stream","params":{"message":{"kind":"message","messageId":"m1","role":"user","contextId":"s1","taskId":"t0","parts":[{"kind":"text","text":"hi"}]}}}`,
			a2a.Request{ID: json.RawMessage(`"x"`), Method: a2a.MethodStream03, Version: a2a.V03, MessageID: "m1", ContextID: "s1", TaskID: "t0", Text: "hi"}, 0},
		{`{"jsonrpc":"2.0","id":3,"method":"SubscribeToTask","params":{"id":"t1"}}`,
			a2a.Request{ID: json.RawMessage(`3`), Method: a2a.MethodSubscribe, Version: a2a.V1, Subscribe: true, TaskID: "t1"}, 0},
		{`{"jsonrpc":"2.0","id":4,"method":"tasks/resubscribe","params":{"id":"t1"}}`,
			a2a.Request{ID: json.RawMessage(`4`), Method: a2a.MethodResubscribe03, Version: a2a.V03, Subscribe: true, TaskID: "t1"}, 0},
		{`nope`, a2a.Request{}, a2a.CodeParseError},
		{`{"jsonrpc":"1.0","id":1,"method":"SubscribeToTask"}`, a2a.Request{ID: json.RawMessage(`1`)}, a2a.CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":{},"method":"SubscribeToTask"}`, a2a.Request{}, a2a.CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}`, a2a.Request{ID: json.RawMessage(`1`), Method: "GetTask"}, a2a.CodeMethodNotFound},
		{`{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{}}`,
			a2a.Request{ID: json.RawMessage(`1`), Method: a2a.MethodSubscribe, Version: a2a.V1, Subscribe: true}, a2a.CodeInvalidParams},
		{`{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"parts":[]}}}`,
			a2a.Request{ID: json.RawMessage(`1`), Method: a2a.MethodStream03, Version: a2a.V03}, a2a.CodeInvalidParams},
	}
	for _, r := range rows {
		got, err := a2a.ParseRequest([]byte(r.body))
		assert.Equal(t, r.want, got, r.body)
		if r.code == 0 {
			assert.NoError(t, err, r.body)
			continue
		}
		var e *a2a.Error
		require.ErrorAs(t, err, &e, r.body)
		assert.Equal(t, r.code, e.Code, r.body)
	}
	b := a2a.AppendError(nil, json.RawMessage(`7`), &a2a.Error{Code: a2a.CodeTaskNotFound, Message: "no task \"t9\""})
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"no task \"t9\""}}`, string(b))
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`, string(a2a.AppendError(nil, nil, &a2a.Error{Code: -32700, Message: "x"})))
}

func TestCard(t *testing.T) {
	t.Parallel()
	c := a2a.Card{Name: "agent", Description: "d", Version: "1", URL: "http://h/a2a", Skills: []a2a.Skill{{ID: "chat", Name: "Chat", Description: "talk"}}}
	b, err := json.Marshal(c)
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"agent","description":"d","version":"1",
		"supportedInterfaces":[{"url":"http://h/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"},{"url":"http://h/a2a","protocolBinding":"JSONRPC","protocolVersion":"0.3"}],
		"url":"http://h/a2a","protocolVersion":"0.3.0","preferredTransport":"JSONRPC",
		"capabilities":{"streaming":true,"pushNotifications":false},
		"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain","application/json"],
		"skills":[{"id":"chat","name":"Chat","description":"talk","tags":[]}]}`, string(b))
	c.Versions = []a2a.Version{a2a.V03}
	b, err = json.Marshal(c)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "supportedInterfaces", "a 0.3 card only")
}

// Whatever the body, ParseRequest answers a request or an *Error, never
// panics, and a request it accepts names a method it serves.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"t1"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"message/stream","params":{"message":{"parts":[{"kind":"text","text":"hi"}]}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := a2a.ParseRequest(body)
		if err != nil {
			var e *a2a.Error
			require.ErrorAs(t, err, &e)
			assert.True(t, json.Valid(a2a.AppendError(nil, r.ID, e)))
			return
		}
		assert.Contains(t, []string{a2a.MethodStream, a2a.MethodSubscribe, a2a.MethodStream03, a2a.MethodResubscribe03}, r.Method)
	})
}
