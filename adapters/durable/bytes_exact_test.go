package durable_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/eventbus"
)

// readSSE reads a closed stream's SSE route from offset -1 and returns the
// concatenated payload of its data events (base64-decoded when the answer
// says so) and the Stream-SSE-Data-Encoding header.
func readSSE(t *testing.T, url string) (string, string) {
	t.Helper()
	res, err := http.Get(url + "?live=sse&offset=-1")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	enc := res.Header.Get("Stream-SSE-Data-Encoding")
	var got strings.Builder
	sc := bufio.NewScanner(res.Body)
	event, lines := "", []string(nil)
	flush := func() {
		if event == "data" {
			text := strings.Join(lines, "\n")
			if enc == "base64" {
				b, err := base64.StdEncoding.DecodeString(text)
				require.NoError(t, err, "%q", text)
				text = string(b)
			}
			got.WriteString(text)
		}
		event, lines = "", nil
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data:"):
			d := strings.TrimPrefix(line, "data:")
			lines = append(lines, strings.TrimPrefix(d, " "))
		}
	}
	flush()
	return got.String(), enc
}

// Byte streams of unusual content types keep their bytes exactly (NUL,
// invalid UTF-8, CR, LF) on every read route: catch-up, long-poll and SSE;
// the bus holds them as byte payloads of the canonical media type, or of
// application/octet-stream when the bus refuses the stream's type.
func TestByteStreamsOfOddContentTypesKeepExactBytes(t *testing.T) {
	parts := []string{"\x00", "\xff\xfe\x80", "a\r\nb\rc\n", " lead", "\xc3\x28 end\x00"}
	all := strings.Join(parts, "")
	for _, tc := range []struct {
		ct, busType string
	}{
		{"application/octet-stream", "application/octet-stream"},
		{"Application/X-Odd; Q=\"a b\"", `application/x-odd; q="a b"`},
		{"image/*", "application/octet-stream"},
		{"nonsense", "application/octet-stream"},
		{"application/vnd.x+json", "application/vnd.x+json"},
	} {
		t.Run(tc.ct, func(t *testing.T) {
			r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{})
			resp, body := r.do(t, http.MethodPut, "s", "", "Content-Type", tc.ct)
			require.Equal(t, http.StatusCreated, resp.StatusCode, body)
			for _, p := range parts {
				resp, body = r.do(t, http.MethodPost, "s", p, "Content-Type", tc.ct)
				require.Equal(t, http.StatusNoContent, resp.StatusCode, body)
			}
			sub, err := r.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
			require.NoError(t, err)
			defer sub.Close()
			for _, p := range parts {
				ev, err := sub.Next(context.Background())
				require.NoError(t, err)
				assert.Equal(t, tc.busType, ev.ContentType())
				assert.Equal(t, p, string(ev.Data))
			}
			resp, body = r.do(t, http.MethodGet, "s?offset=-1", "")
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, all, body, "catch-up")
			assert.Equal(t, tc.ct, resp.Header.Get("Content-Type"))
			resp, body = r.do(t, http.MethodGet, "s?offset=-1&live=long-poll", "")
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, all, body, "long-poll")
			resp, _ = r.do(t, http.MethodPost, "s", "", "Stream-Closed", "true")
			require.Equal(t, http.StatusNoContent, resp.StatusCode)
			got, enc := readSSE(t, r.url+"s")
			assert.Equal(t, "base64", enc)
			assert.Equal(t, all, got, "SSE")
		})
	}
}
