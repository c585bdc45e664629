package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// POST /session/{id}/events takes an idempotent producer's stamp as the
// Durable Streams headers Producer-Id/-Epoch/-Seq (eventbus.WithProducer):
// a retry after a lost answer is acknowledged with the stored event's id
// and stores nothing (a retry of an older sequence than the last accepted,
// as a pipelining producer sends, with the last accepted event's id and
// sequence: the bus keeps only those), a zombie of an older epoch is
// refused naming the epoch in force, a gap naming the expected sequence; a
// partial or malformed stamp is a 400. The table runs in order against one
// session.
func TestPublishProducer(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	require.NoError(t, s.Bus().CreateSession("s1", ""))
	post := func(id, epoch, seq string) (int, http.Header, map[string]any) {
		req := httptest.NewRequest(http.MethodPost, "/session/s1/events", strings.NewReader(`{"type":"note","data":1}`))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range map[string]string{"Producer-Id": id, "Producer-Epoch": epoch, "Producer-Seq": seq} {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		var out map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out), "%s", rec.Body)
		return rec.Code, rec.Header(), out
	}
	status, hdr, first := post("w", "1", "0")
	require.Equal(t, http.StatusAccepted, status, "%v", first)
	assert.Equal(t, "1", hdr.Get("Producer-Epoch"))
	assert.Equal(t, "0", hdr.Get("Producer-Seq"))
	answers := map[string]map[string]any{}
	for _, tc := range []struct {
		name, id, epoch, seq string
		status               int
		code                 string
		header, value        string
	}{
		{"retry after a lost answer", "w", "1", "0", http.StatusOK, "", "Producer-Seq", "0"},
		{"gap", "w", "1", "2", http.StatusConflict, "producer_seq_gap", "Producer-Expected-Seq", "1"},
		{"next", "w", "1", "1", http.StatusAccepted, "", "Producer-Seq", "1"},
		{"retry of an older sequence", "w", "1", "0", http.StatusOK, "", "Producer-Seq", "1"},
		{"new epoch", "w", "2", "0", http.StatusAccepted, "", "Producer-Epoch", "2"},
		{"zombie", "w", "1", "2", http.StatusForbidden, "stale_producer_epoch", "Producer-Epoch", "2"},
		{"new epoch not at 0", "w", "3", "4", http.StatusBadRequest, "invalid_argument", "", ""},
		{"id without the rest", "w", "", "", http.StatusBadRequest, "invalid_producer", "", ""},
		{"sequence not a number", "w", "1", "x", http.StatusBadRequest, "invalid_producer", "", ""},
		{"no id", "", "1", "0", http.StatusBadRequest, "invalid_producer", "", ""},
	} {
		status, hdr, out := post(tc.id, tc.epoch, tc.seq)
		answers[tc.name] = out
		assert.Equal(t, tc.status, status, "%s: %v", tc.name, out)
		if tc.code != "" {
			assert.Equal(t, tc.code, out["code"], tc.name)
		}
		if tc.header != "" {
			assert.Equal(t, tc.value, hdr.Get(tc.header), tc.name)
		}
		if tc.name == "retry after a lost answer" {
			assert.Equal(t, first["id"], out["id"], "the duplicate names the stored event")
			assert.Equal(t, first["cursor"], out["cursor"])
			assert.Equal(t, true, out["duplicate"])
		}
		if tc.name == "retry of an older sequence" {
			assert.Equal(t, answers["next"]["id"], out["id"], "the last accepted event, named by Producer-Seq")
			assert.NotEqual(t, first["id"], out["id"])
			assert.Equal(t, true, out["duplicate"])
		}
	}
	assert.Equal(t, uint64(3), s.Bus().LastEventID(), "three publishes stored, once each")
}
