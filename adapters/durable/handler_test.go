package durable_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/testkit"
	"github.com/replaybus/replaybus/scope"
)

// rig is a handler over a fresh bus on a loopback test server.
type rig struct {
	bus *eventbus.Bus
	h   *durable.Handler
	url string // the prefix's URL
}

func newRig(t *testing.T, o eventbus.Options, ho durable.HandlerOptions) *rig {
	t.Helper()
	bus, err := eventbus.New(o)
	require.NoError(t, err)
	h, err := durable.NewHandler(bus, ho)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		_ = bus.Close()
	})
	return &rig{bus: bus, h: h, url: srv.URL + durable.Pattern}
}

// do sends one request and returns the answer with its body read.
func (r *rig) do(t *testing.T, method, name, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, r.url+name, strings.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp, string(b)
}

func TestOffsetRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := eventbus.Position{
			ID:    rapid.Uint64Range(0, resume.MaxID).Draw(t, "id"),
			Epoch: rapid.StringMatching(`[^\x00-\x1f]{1,20}`).Draw(t, "epoch"),
		}
		s := durable.FormatOffset(p)
		assert.NotContains(t, []string{"-1", "now"}, s)
		for _, bad := range []string{",", "&", "=", "?", "/", " "} {
			assert.NotContains(t, s, bad, "offset %q", s)
		}
		got, err := durable.ParseOffset(s)
		require.NoError(t, err, s)
		assert.Equal(t, p, got)
		q := eventbus.Position{ID: rapid.Uint64Range(0, resume.MaxID).Draw(t, "id2"), Epoch: p.Epoch}
		assert.Equal(t, p.ID < q.ID, s < durable.FormatOffset(q), "offsets of one epoch sort as their ids")
	})
}

func TestParseOffsetRefuses(t *testing.T) {
	for _, s := range []string{"", "-1", "now", "abc", "e_1", "e_00000000000000001", "_0000000000000001",
		"e_000000000000000x", "e/x_0000000000000001", "~!!_0000000000000001", "e_+000000000000001"} {
		_, err := durable.ParseOffset(s)
		var oe *durable.OffsetError
		require.ErrorAs(t, err, &oe, "%q", s)
		assert.Equal(t, s, oe.Value)
	}
}

// The offset and the SSE route's epoch-qualified id name the same event.
func TestOffsetTranslatesToSSEID(t *testing.T) {
	p := eventbus.Position{ID: 42, Epoch: "9f3c"}
	id := resume.FormatID(p.ID, p.Epoch)
	cur, err := resume.ParseCursor(id)
	require.NoError(t, err)
	assert.Equal(t, "9f3c_0000000000000042", durable.FormatOffset(*cur))
	back, err := durable.ParseOffset(durable.FormatOffset(*cur))
	require.NoError(t, err)
	assert.Equal(t, id, resume.FormatID(back.ID, back.Epoch))
}

// An offset whose events the replay buffer evicted is 410 ring_evicted,
// and one of another epoch (a restarted bus) is 410 as well, code
// epoch_reset, naming the offset and the epoch in force — also on a
// bus with a snapshot provider, whose snapshot frame (the application's
// state, not the stream's bytes) stands in for a lost position.
func TestEvictedAndForeignOffsetsAreGone(t *testing.T) {
	for _, snapshots := range []bool{false, true} {
		t.Run(map[bool]string{false: "no provider", true: "snapshot provider"}[snapshots], func(t *testing.T) {
			o := eventbus.Options{ReplayBufferSize: 3, Epoch: "e1"}
			if snapshots {
				o.Snapshots = func(context.Context, string, scope.Kind) (json.RawMessage, uint64, error) {
					return json.RawMessage(`"state"`), 3, nil
				}
			}
			evictedAndForeignOffsetsAreGone(t, o)
		})
	}
}

func evictedAndForeignOffsetsAreGone(t *testing.T, o eventbus.Options) {
	r := newRig(t, o, durable.HandlerOptions{})
	_, err := r.bus.Publish("elsewhere", "tick", nil) // the stream starts after id 1
	require.NoError(t, err)
	resp, _ := r.do(t, http.MethodPut, "s", "", "Content-Type", "text/plain")
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	start := resp.Header.Get("Stream-Next-Offset")
	var offsets []string
	for _, b := range []string{"a", "b", "c", "d", "e"} {
		resp, _ = r.do(t, http.MethodPost, "s", b, "Content-Type", "text/plain")
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
		offsets = append(offsets, resp.Header.Get("Stream-Next-Offset"))
	}
	for _, off := range []string{start, offsets[0]} { // the stream's start, the offset after "a"
		resp, body := r.do(t, http.MethodGet, "s?offset="+off, "")
		assert.Equal(t, http.StatusGone, resp.StatusCode, off)
		assert.Contains(t, body, `"ring_evicted"`, off)
		assert.Contains(t, body, off, "the answer names the offset")
	}
	resp, body := r.do(t, http.MethodGet, "s?offset=-1", "")
	assert.Equal(t, http.StatusOK, resp.StatusCode, "-1: what the stream holds")
	assert.Equal(t, "cde", body)

	resp, body = r.do(t, http.MethodGet, "s?offset="+offsets[1], "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "cde", body)

	foreign := durable.FormatOffset(eventbus.Position{ID: 4, Epoch: "other"})
	resp, body = r.do(t, http.MethodGet, "s?offset="+foreign, "")
	assert.Equal(t, http.StatusGone, resp.StatusCode)
	// Not ring_evicted: the offset is of another bus incarnation, and the
	// answer says so, naming the offset and the epoch in force.
	assert.Contains(t, body, `"epoch_reset"`)
	assert.Contains(t, body, foreign)
	assert.Contains(t, body, `\"e1\"`)

	// The bus decides what is of its epoch: an offset of this epoch past
	// its newest id is another incarnation's too.
	future := durable.FormatOffset(eventbus.Position{ID: 1000, Epoch: "e1"})
	resp, body = r.do(t, http.MethodGet, "s?offset="+future, "")
	assert.Equal(t, http.StatusGone, resp.StatusCode)
	assert.Contains(t, body, `"epoch_reset"`)
}

// A session closed by another route (Go's CloseSession) is the stream's
// EOF: a long-poll waiting at the tail returns 204 with Stream-Closed.
func TestSessionClosedByGoIsEOF(t *testing.T) {
	r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{LongPollTimeout: 30 * time.Second})
	_, err := r.bus.Publish("run", "tick", map[string]int{"n": 1})
	require.NoError(t, err)
	resp, body := r.do(t, http.MethodGet, "run?offset=-1", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, `[{"v":1,"id":1,"type":"tick","session":"run","data":{"n":1}}]`, body)
	tail := resp.Header.Get("Stream-Next-Offset")

	done := make(chan *http.Response, 1)
	go func() {
		resp, _ := r.do(t, http.MethodGet, "run?live=long-poll&offset="+tail, "")
		done <- resp
	}()
	require.Eventually(t, func() bool { return testkit.SubscriberCounts(r.bus)["run"] == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, r.bus.CloseSession("run"))
	resp = <-done
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get("Stream-Closed"))
	assert.Equal(t, tail, resp.Header.Get("Stream-Next-Offset"))

	resp, _ = r.do(t, http.MethodGet, "run?offset="+tail, "")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get("Stream-Closed"))
}

// Closing a stream closes its session (an SSE subscriber hears
// session_closed) and its content stays readable.
func TestCloseClosesSessionAndKeepsContent(t *testing.T) {
	r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{})
	resp, _ := r.do(t, http.MethodPut, "doc", "hello ", "Content-Type", "text/plain")
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	sub, err := r.bus.Subscribe(context.Background(), "doc", eventbus.SubscribeOptions{NoReplay: true})
	require.NoError(t, err)
	defer sub.Close()
	resp, _ = r.do(t, http.MethodPost, "doc", "world", "Content-Type", "text/plain", "Stream-Closed", "true")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get("Stream-Closed"))
	var types []string
	for ev, err := range sub.All(context.Background()) {
		if err != nil {
			break
		}
		types = append(types, ev.Type)
	}
	assert.Equal(t, []string{"durable", "session_closed"}, types)
	assert.False(t, r.bus.SessionExists("doc"))

	resp, body := r.do(t, http.MethodGet, "doc?offset=-1", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "hello world", body)
	assert.Equal(t, "true", resp.Header.Get("Stream-Closed"))
}

// SSE live mode sends data then control events, base64 for binary streams.
func TestSSEBinaryIsBase64(t *testing.T) {
	r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{})
	resp, _ := r.do(t, http.MethodPut, "bin", "\x00\x01\x02", "Content-Type", "application/octet-stream", "Stream-Closed", "true")
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	res, err := http.Get(r.url + "bin?live=sse&offset=-1")
	require.NoError(t, err)
	defer res.Body.Close()
	assert.Equal(t, "base64", res.Header.Get("Stream-SSE-Data-Encoding"))
	var lines []string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	assert.Equal(t, []string{"event: data", "data:AAEC", "", "event: control",
		`data:{"streamNextOffset":"e1_0000000000000001","upToDate":true,"streamClosed":true}`, ""}, lines)
}

func TestNewHandlerRefusesBadOptions(t *testing.T) {
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer bus.Close()
	for _, o := range []durable.HandlerOptions{
		{Prefix: "v1/"}, {Prefix: "/v1"}, {LongPollTimeout: -1}, {LongPollTimeout: time.Hour},
		{ChunkBytes: -1}, {EventType: "session_closed"},
	} {
		_, err := durable.NewHandler(bus, o)
		assert.Error(t, err, "%+v", o)
	}
	_, err = durable.NewHandler(nil, durable.HandlerOptions{})
	assert.Error(t, err)
}

// An append to a stream whose session another route closed is 409 with
// Stream-Closed (the stream's EOF), not a server error.
func TestAppendAfterSessionClosedElsewhere(t *testing.T) {
	r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{})
	resp, _ := r.do(t, http.MethodPut, "s", "a", "Content-Type", "text/plain")
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	tail := resp.Header.Get("Stream-Next-Offset")
	require.NoError(t, r.bus.CloseSession("s"))
	resp, _ = r.do(t, http.MethodPost, "s", "b", "Content-Type", "text/plain")
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get("Stream-Closed"))
	assert.Equal(t, tail, resp.Header.Get("Stream-Next-Offset"))
	resp, _ = r.do(t, http.MethodHead, "s", "")
	assert.Equal(t, "true", resp.Header.Get("Stream-Closed"))
}
