package server

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPostContentEncodingIs415: a gzip body was read as if it were JSON and
// answered "invalid UTF-8 at byte 1", which says nothing about the cause.
// Any Content-Encoding other than identity is now 415
// unsupported_content_encoding naming it, with Accept-Encoding: identity,
// on both POST routes, and nothing is created or published.
func TestPostContentEncodingIs415(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	require.NoError(t, s.Bus().CreateSession("s1", ""))
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)

	gz := func(body string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write([]byte(body))
		require.NoError(t, zw.Close())
		return b.Bytes()
	}
	post := func(path, encoding string, body []byte) (*http.Response, map[string]any) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if encoding != "" {
			req.Header.Set("Content-Encoding", encoding)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp, out
	}
	for _, tc := range []struct{ path, encoding, body string }{
		{"/session/s1/events", "gzip", `{"type":"x"}`},
		{"/session/s1/events", "GZIP", `{"type":"x"}`},
		{"/session/s1/events", "br", `{"type":"x"}`},
		{"/session/s1/events", "identity, gzip", `{"type":"x"}`},
		{"/sessions", "gzip", `{"id":"zipped"}`},
		{"/sessions", "deflate", ``},
	} {
		body := []byte(tc.body)
		if tc.encoding == "gzip" {
			body = gz(tc.body)
		}
		resp, out := post(tc.path, tc.encoding, body)
		assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "%s %s", tc.path, tc.encoding)
		assert.Equal(t, "unsupported_content_encoding", out["code"])
		assert.Contains(t, out["message"], `"`+tc.encoding+`"`, "names the encoding")
		assert.Equal(t, "identity", resp.Header.Get("Accept-Encoding"))
	}
	assert.Zero(t, s.Bus().LastEventID(), "nothing was published")
	assert.False(t, s.Bus().SessionExists("zipped"))

	// identity is no encoding at all.
	resp, out := post("/session/s1/events", "identity", []byte(`{"type":"x"}`))
	assert.Equal(t, http.StatusAccepted, resp.StatusCode, "%v", out)
}
