package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/replaybus/replaybus/internal/textutil"
)

// The JSON-RPC methods this package reads, by version.
const (
	MethodStream         = "SendStreamingMessage" // 1.0
	MethodSubscribe      = "SubscribeToTask"      // 1.0
	MethodStream03       = "message/stream"       // 0.3
	MethodResubscribe03  = "tasks/resubscribe"    // 0.3
	jsonrpcVersion       = "2.0"
	maxErrorMessageBytes = 256
)

// JSON-RPC and A2A error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	CodeTaskNotFound   = -32001
	CodeUnsupportedOp  = -32004
)

// Error is a JSON-RPC error: what [ParseRequest] returns, and what a
// handler answers with [AppendError].
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Error returns "a2a: <message> (<code>)".
func (e *Error) Error() string { return fmt.Sprintf("a2a: %s (%d)", e.Message, e.Code) }

// Request is a streaming JSON-RPC request: a message to start a task
// (Subscribe false) or a subscription to a task (Subscribe true).
type Request struct {
	// ID is the request's id, which every response of the stream repeats
	// (a JSON number, string or null).
	ID json.RawMessage
	// Method is the method as sent; Version the protocol it belongs to.
	Method  string
	Version Version
	// Subscribe is true for SubscribeToTask / tasks/resubscribe.
	Subscribe bool
	// TaskID is the task subscribed to, or the task a message continues.
	TaskID string
	// ContextID, MessageID and Text (its text parts joined) describe a
	// message.
	ContextID, MessageID, Text string
}

// ParseRequest reads a JSON-RPC request for one of the streaming methods
// of either version. Errors are an *Error: CodeParseError for a body that
// is not JSON, CodeInvalidRequest for one that is not a JSON-RPC 2.0
// request (the id, when it could be read, is still returned),
// CodeMethodNotFound for another method, CodeInvalidParams for params
// without a message with parts (a stream) or a task id (a subscription);
// each message names the value.
func ParseRequest(body []byte) (Request, error) {
	var env struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  *string         `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	if trimmed := bytes.TrimSpace(body); json.Valid(trimmed) && (len(trimmed) == 0 || trimmed[0] != '{') {
		if len(trimmed) > 0 && trimmed[0] == '[' {
			return Request{}, &Error{CodeInvalidRequest, "a batch (a JSON array) is not served here: send one request object"}
		}
		return Request{}, &Error{CodeInvalidRequest, "the body is " + quote(string(trimmed)) + ", not a JSON-RPC request object"}
	}
	if err := json.Unmarshal(body, &env); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Request{}, &Error{CodeInvalidRequest, fmt.Sprintf("member %s is a JSON %s, not what JSON-RPC 2.0 asks for", quote(te.Field), te.Value)}
		}
		return Request{}, &Error{CodeParseError, "the body is not a JSON object: " + clip(textutil.PublicMessage(err))}
	}
	r := Request{ID: env.ID}
	if id := bytes.TrimSpace(env.ID); len(id) > 0 && (id[0] == '{' || id[0] == '[' || id[0] == 't' || id[0] == 'f') {
		r.ID = nil
		return r, &Error{CodeInvalidRequest, fmt.Sprintf("id %s is not a string, number or null", quote(string(id)))}
	}
	if env.JSONRPC != jsonrpcVersion || env.Method == nil {
		return r, &Error{CodeInvalidRequest, fmt.Sprintf("not a JSON-RPC 2.0 request (jsonrpc %s, method set %v)", quote(env.JSONRPC), env.Method != nil)}
	}
	r.Method = *env.Method
	switch r.Method {
	case MethodStream, MethodSubscribe:
		r.Version = V1
	case MethodStream03, MethodResubscribe03:
		r.Version = V03
	default:
		return r, &Error{CodeMethodNotFound, fmt.Sprintf("method %s is not served here (want %s, %s, %s or %s)",
			quote(r.Method), MethodStream, MethodSubscribe, MethodStream03, MethodResubscribe03)}
	}
	r.Subscribe = r.Method == MethodSubscribe || r.Method == MethodResubscribe03
	if r.Subscribe {
		var p struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(env.Params, &p); err != nil || p.ID == "" {
			return r, &Error{CodeInvalidParams, fmt.Sprintf("%s needs params {\"id\": <task id>}, got %s", r.Method, quote(string(env.Params)))}
		}
		r.TaskID = p.ID
		return r, nil
	}
	var p struct {
		Message *struct {
			MessageID string `json:"messageId"`
			ContextID string `json:"contextId"`
			TaskID    string `json:"taskId"`
			Parts     []struct {
				Kind string  `json:"kind"`
				Text *string `json:"text"`
			} `json:"parts"`
		} `json:"message"`
	}
	if err := json.Unmarshal(env.Params, &p); err != nil || p.Message == nil || len(p.Message.Parts) == 0 {
		return r, &Error{CodeInvalidParams, fmt.Sprintf("%s needs params {\"message\": {\"parts\": [...]}}, got %s", r.Method, quote(string(env.Params)))}
	}
	var text strings.Builder
	for _, part := range p.Message.Parts {
		if part.Text != nil {
			text.WriteString(*part.Text)
		}
	}
	r.MessageID, r.ContextID, r.TaskID, r.Text = p.Message.MessageID, p.Message.ContextID, p.Message.TaskID, text.String()
	return r, nil
}

// AppendError appends a JSON-RPC error response for request id (nil:
// null) to dst: the body of a refused request, or an SSE frame's data.
func AppendError(dst []byte, id json.RawMessage, err *Error) []byte {
	b, _ := textutil.MarshalJSON(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *Error          `json:"error"`
	}{jsonrpcVersion, orNull(id), err})
	return append(dst, b...)
}

// clip cuts s to maxErrorMessageBytes at a character boundary, for an
// error message of the server's own.
func clip(s string) string {
	if len(s) <= maxErrorMessageBytes {
		return s
	}
	cut := maxErrorMessageBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// quote is a value the client sent, as every route's answers quote it:
// quoted (control characters and bytes that are not UTF-8 escaped) and
// cut to 64 bytes, with its length said.
func quote(s string) string { return textutil.Quote(s, 64) }

func orNull(v json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(v)) == 0 {
		return json.RawMessage("null")
	}
	return v
}
