package browser_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/browser"
)

func serve(t *testing.T, method string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, browser.Path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	browser.Handler{}.ServeHTTP(rec, req)
	return rec.Result()
}

func TestHandlerServesTheModule(t *testing.T) {
	t.Parallel()
	resp := serve(t, http.MethodGet, nil)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	assert.Equal(t, "Accept-Encoding", resp.Header.Get("Vary"))
	assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	assert.Regexp(t, `^"[A-Za-z0-9_-]{16}"$`, resp.Header.Get("ETag"))
	assert.Empty(t, resp.Header.Get("Content-Encoding"))
	assert.Equal(t, browser.Script(), body)
	assert.Regexp(t, `export\s*\{[^}]*\bas connect\b[^}]*\}`, string(body), "an ES module exporting connect")
}

// Accept-Encoding decides the representation; each has its own ETag.
func TestHandlerGzipFollowsAcceptEncoding(t *testing.T) {
	t.Parallel()
	plainTag := serve(t, http.MethodGet, nil).Header.Get("ETag")
	for _, tc := range []struct {
		accept string
		gzip   bool
	}{
		{"gzip", true},
		{"gzip, deflate, br, zstd", true},
		{"br;q=1.0, GZIP;q=0.5", true},
		{"*", true},
		{"gzip;q=0, *", false},
		{"*;q=0", false},
		{"gzip;q=0", false},
		{"br", false},
		{"identity", false},
		{"", false},
	} {
		t.Run(tc.accept, func(t *testing.T) {
			t.Parallel()
			resp := serve(t, http.MethodGet, http.Header{"Accept-Encoding": {tc.accept}})
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			if !tc.gzip {
				assert.Empty(t, resp.Header.Get("Content-Encoding"))
				assert.Equal(t, plainTag, resp.Header.Get("ETag"))
				assert.Equal(t, browser.Script(), body)
				return
			}
			assert.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))
			assert.NotEqual(t, plainTag, resp.Header.Get("ETag"), "another representation, another strong ETag")
			assert.Len(t, body, browser.GzipSize())
			zr, err := gzip.NewReader(bytes.NewReader(body))
			require.NoError(t, err)
			plain, err := io.ReadAll(zr)
			require.NoError(t, err)
			assert.Equal(t, browser.Script(), plain)
		})
	}
}

func TestHandlerAnswersRevalidationWith304(t *testing.T) {
	t.Parallel()
	for _, accept := range []string{"", "gzip"} {
		tag := serve(t, http.MethodGet, http.Header{"Accept-Encoding": {accept}}).Header.Get("ETag")
		for _, tc := range []struct {
			name, ifNoneMatch string
			status            int
		}{
			{"its ETag", tag, http.StatusNotModified},
			{"weak form", "W/" + tag, http.StatusNotModified},
			{"in a list", `"old", ` + tag, http.StatusNotModified},
			{"star", "*", http.StatusNotModified},
			{"an older version", `"old"`, http.StatusOK},
		} {
			t.Run(accept+"/"+tc.name, func(t *testing.T) {
				resp := serve(t, http.MethodGet, http.Header{"Accept-Encoding": {accept}, "If-None-Match": {tc.ifNoneMatch}})
				assert.Equal(t, tc.status, resp.StatusCode)
				assert.Equal(t, tag, resp.Header.Get("ETag"))
			})
		}
	}
}

func TestHandlerMethods(t *testing.T) {
	t.Parallel()
	head := serve(t, http.MethodHead, nil)
	assert.Equal(t, http.StatusOK, head.StatusCode)
	assert.Equal(t, "text/javascript; charset=utf-8", head.Header.Get("Content-Type"))
	body, _ := io.ReadAll(head.Body)
	assert.Empty(t, body)

	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, "BREW"} {
		resp := serve(t, m, nil)
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, m)
		assert.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
		assert.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
		var e struct{ Code, Message string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e), m)
		assert.Equal(t, "method_not_allowed", e.Code)
		assert.Contains(t, e.Message, `"`+m+`"`)
	}
}

// Script hands out a copy: changing it does not change what is served.
func TestScriptIsACopy(t *testing.T) {
	t.Parallel()
	s := browser.Script()
	s[0] ^= 0xff
	body, _ := io.ReadAll(serve(t, http.MethodGet, nil).Body)
	assert.NotEqual(t, s, body)
	assert.Equal(t, browser.Script(), body)
}
