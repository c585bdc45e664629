package ws_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/testkit"
)

// FuzzParseClientMessage: any bytes give a message or a *MessageError,
// never a panic; a message has exactly one kind; a resume's cursor is in
// the id range; an accepted message re-encodes to something that parses to
// the same message.
func FuzzParseClientMessage(f *testing.F) {
	for _, s := range []string{
		`{"resume":{"lastEventId":"42","epoch":"abc"}}`, `{"resume":{"lastEventId":42}}`, `{"resume":{}}`,
		`{"resume":null}`, `{"resume":{"lastEventId":"e1-7"}}`, `{"resume":{"lastEventId":"e1-7","epoch":"e2"}}`,
		`{"ping":1}`, `{"ping":{"a":[1,2]}}`, `{"ping":null}`, `{}`, `[]`, `null`, `"resume"`, `{"resume":1}`,
		`{"resume":{"lastEventId":1.5}}`, `{"resume":{"lastEventId":-1}}`, `{"resume":{"lastEventId":1e3}}`,
		`{"resume":{"lastEventId":"9007199254740992"}}`, `{"resume":{"x":1}}`, `{"ping":1,"resume":{}}`,
		`{"ping":1}{"ping":2}`, `{"ping":1`, "{\"ping\":\"\xff\"}", ` {"ping" : 2 } `, `{"resume":{"epoch":"a b"}}`,
		`{"type":"cancel"}`, `{"type":"cancel","turn":"t1","cascade":true}`, `{"type":"cancel","turn":""}`,
		`{"type":"cancel","turn":"a\nb"}`, `{"type":"stop"}`, `{"type":"cancel","type":"cancel"}`, `{"type":"cancel","ping":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ws.ParseClientMessage(b)
		if err != nil {
			var me *ws.MessageError
			require.ErrorAs(t, err, &me)
			require.NotEmpty(t, me.Reason)
			require.True(t, utf8.ValidString(me.Reason), "%q", me.Reason)
			return
		}
		kinds := 0
		for _, set := range []bool{m.Resume != nil, m.Ping != nil, m.Cancel != nil, m.CancelErr != nil} {
			if set {
				kinds++
			}
		}
		require.Equal(t, 1, kinds, "exactly one kind")
		switch {
		case m.CancelErr != nil:
			var se *resume.StatusError
			require.ErrorAs(t, m.CancelErr, &se)
			require.Equal(t, resume.CodeInvalidTurnID, se.Code)
		case m.Cancel != nil:
			cb, _ := json.Marshal(struct {
				Type string `json:"type"`
				resume.CancelRequest
			}{"cancel", *m.Cancel})
			m2, err := ws.ParseClientMessage(cb)
			require.NoError(t, err, "%s", cb)
			require.Equal(t, *m.Cancel, *m2.Cancel)
		case m.Resume != nil:
			if m.Resume.Cursor == nil {
				return
			}
			require.LessOrEqual(t, m.Resume.Cursor.ID, uint64(resume.MaxID))
			if m.Resume.Cursor.Epoch != "" {
				require.Equal(t, m.Resume.Cursor.Epoch, m.Resume.Epoch)
			}
			again := map[string]any{"resume": map[string]any{"lastEventId": resume.FormatID(m.Resume.Cursor.ID, m.Resume.Cursor.Epoch), "epoch": m.Resume.Epoch}}
			rb, _ := json.Marshal(again)
			m2, err := ws.ParseClientMessage(rb)
			require.NoError(t, err, "%s", rb)
			require.Equal(t, *m.Resume, *m2.Resume)
		default:
			require.True(t, json.Valid(m.Ping), "%q", m.Ping)
		}
	})
}

// FuzzUpgradeParams drives the handler's validation with arbitrary query
// values and headers: a bad value is a 400 whose JSON names a code and
// stays short; a good one gets as far as the handshake check (426, nothing
// subscribed) exactly when resume.ParseRequest accepts it too.
func FuzzUpgradeParams(f *testing.F) {
	for _, s := range [][5]string{
		{"descendants", "1", "16", "42", ""}, {"galaxy", "", "", "", ""}, {"", "2", "", "", ""},
		{"", "", "15", "", ""}, {"", "", "2049", "", ""}, {"", "", "", "-1", ""}, {"", "", "", "ep-3", "ep"},
		{"", "", "", "", "bad epoch"}, {"all", "0", "2048", "9007199254740991", "x_1"}, {"", "", "", "1\r\n2", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(f, err)
	f.Cleanup(func() { _ = bus.Close() })
	require.NoError(f, bus.CreateSession("s1", ""))
	h, err := ws.NewHandler(bus, ws.HandlerOptions{})
	require.NoError(f, err)
	mux := http.NewServeMux()
	mux.Handle(ws.Pattern, h)
	f.Fuzz(func(t *testing.T, scope, replay, maxQueued, cursor, epoch string) {
		q := url.Values{}
		for k, v := range map[string]string{"scope": scope, "replay": replay, "maxQueued": maxQueued, "lastEventId": cursor} {
			if v != "" {
				q.Set(k, v)
			}
		}
		r := httptest.NewRequest(http.MethodGet, "/session/s1/ws?"+q.Encode(), nil)
		if epoch != "" && !strings.ContainsAny(epoch, "\r\n\x00") {
			r.Header.Set(resume.HeaderEpoch, epoch)
		}
		r.SetPathValue("id", "s1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		_, err := resume.ParseRequest(r, "s1", bus.Epoch(), resume.QueryRules{})
		if err == nil {
			assert.Equal(t, http.StatusUpgradeRequired, w.Code, "valid parameters reach the handshake check: %s", w.Body)
			return
		}
		require.Equal(t, http.StatusBadRequest, w.Code)
		var body struct{ Code, Message string }
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), "%s", w.Body)
		var perr *resume.StatusError
		require.ErrorAs(t, err, &perr)
		assert.Equal(t, perr.Code, body.Code)
		assert.NotEmpty(t, body.Message)
		assert.Less(t, len(body.Message), 512, "the message quotes the value cut short")
		assert.Zero(t, testkit.SubscriberCounts(bus)["s1"], "nothing subscribed")
	})
}
