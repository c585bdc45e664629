package durable_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/eventbus"
)

// readFromStart reads name from offset -1 in mode (catch-up, long-poll or
// SSE) and returns the status and the first answer's data.
func readFromStart(t *testing.T, r *rig, name, mode string) (int, string) {
	t.Helper()
	switch mode {
	case "catch-up":
		resp, body := r.do(t, http.MethodGet, name+"?offset=-1", "")
		return resp.StatusCode, body
	case "long-poll":
		resp, body := r.do(t, http.MethodGet, name+"?offset=-1&live=long-poll", "")
		return resp.StatusCode, body
	}
	res, err := http.Get(r.url + name + "?offset=-1&live=sse")
	require.NoError(t, err)
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return res.StatusCode, ""
	}
	var data []string
	event := ""
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data:") && event == "data":
			data = append(data, strings.TrimPrefix(line, "data:"))
		case line == "" && event == "control":
			return res.StatusCode, strings.Join(data, "\n")
		}
	}
	return res.StatusCode, strings.Join(data, "\n")
}

// Offset -1 means "from the beginning of what the stream holds"
// (PROTOCOL.md): after the replay buffer evicted the oldest events, and on
// a quiet stream whose session id lived before (the bus marks that history
// lost), a read from -1 — catch-up, long-poll and SSE alike — returns what
// is held, never 410 ring_evicted. So does a fork whose name lived before
// (its own session's history starts at the fork). An offset the client
// holds is still 410 when events after it are gone
// (TestEvictedAndForeignOffsetsAreGone).
func TestOffsetMinusOneReadsWhatTheStreamHolds(t *testing.T) {
	for _, mode := range []string{"catch-up", "long-poll", "sse"} {
		t.Run(mode, func(t *testing.T) {
			r := newRig(t, eventbus.Options{Epoch: "e1", ReplayBufferSize: 3}, durable.HandlerOptions{})
			text := []string{"Content-Type", "text/plain"}

			// The oldest events evicted.
			resp, _ := r.do(t, http.MethodPut, "s", "", text...)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			for _, b := range []string{"a", "b", "c", "d", "e"} {
				resp, _ = r.do(t, http.MethodPost, "s", b, text...)
				require.Equal(t, http.StatusNoContent, resp.StatusCode)
			}
			status, body := readFromStart(t, r, "s", mode)
			assert.Equal(t, http.StatusOK, status, "evicted")
			assert.Equal(t, "cde", body, "evicted")

			// A quiet stream of another route whose session id lived before.
			for range 2 {
				_, err := r.bus.Publish("q", "old", nil)
				require.NoError(t, err)
			}
			require.NoError(t, r.bus.CloseSession("q"))
			require.NoError(t, r.bus.CreateSession("q", "")) // reopened, its history gone
			ev, err := r.bus.Publish("q", "tick", map[string]int{"n": 9})
			require.NoError(t, err)
			status, body = readFromStart(t, r, "q", mode)
			assert.Equal(t, http.StatusOK, status, "quiet")
			assert.Equal(t, `[{"v":1,"id":`+itoa(int64(ev.ID))+`,"type":"tick","session":"q","data":{"n":9}}]`, body, "quiet")

			// A fork whose name lived before.
			resp, _ = r.do(t, http.MethodPut, "src", "x", text...)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			forkAt := resp.Header.Get("Stream-Next-Offset")
			for range 2 {
				_, err := r.bus.Publish("f", "old", nil)
				require.NoError(t, err)
			}
			require.NoError(t, r.bus.CloseSession("f"))
			resp, body = r.do(t, http.MethodPut, "f", "", "Content-Type", "text/plain", "Stream-Forked-From", "/v1/stream/src")
			require.Equal(t, http.StatusCreated, resp.StatusCode, body)
			resp, _ = r.do(t, http.MethodPost, "f", "y", text...)
			require.Equal(t, http.StatusNoContent, resp.StatusCode)
			status, body = readFromStart(t, r, "f", mode)
			assert.Equal(t, http.StatusOK, status, "fork")
			assert.Equal(t, "xy", body, "fork")
			resp, body = r.do(t, http.MethodGet, "f?offset="+forkAt, "")
			assert.Equal(t, http.StatusOK, resp.StatusCode, "the fork offset: %s", body)
			assert.Equal(t, "y", body, "the fork offset")
		})
	}
}
