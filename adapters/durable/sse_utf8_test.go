package durable_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/eventbus"
)

// A text stream read live over SSE whose producer cut multi-byte
// characters between appends (é in two, an emoji in four): every SSE data
// event is valid UTF-8 — the handler holds an append that ends inside a
// character until the rest arrives, and its control event's offset stays
// before it, so a resume loses nothing — and the data events together are
// the text; catch-up returns the bytes exactly as appended. A stream that
// closes inside a character, or holds bytes that are not UTF-8 at all,
// sends U+FFFD for them over SSE (the text a client's decoder would show).
func TestSSEDataOfATextStreamIsAlwaysUTF8(t *testing.T) {
	big := strings.Repeat("中", 11000) // 33,000 bytes
	for _, tc := range []struct {
		name    string
		appends []string
		want    string // the text the SSE data events make together
	}{
		{"a character in two", []string{"caf\xc3", "\xa9 ok"}, "café ok"},
		{"an emoji in four", []string{"hi \xf0", "\x9f", "\x98", "\x80!"}, "hi 😀!"},
		{"whole characters", []string{"é", "😀", "x"}, "é😀x"},
		{"closed inside a character", []string{"end\xe2\x82"}, "end\uFFFD"},
		{"not UTF-8", []string{"a\xffb", "c"}, "a\uFFFDbc"},
		// A producer copying a byte stream in 32 KiB buffers: each append
		// ends inside a character; the run was sent broken past 64 KiB.
		{"large appends each cut inside a character",
			[]string{big + "\xe4", "\xb8\xad" + big + "\xe4", "\xb8\xad" + big + "\xe4", "\xb8\xad end"},
			big + "中" + big + "中" + big + "中 end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{})
			text := []string{"Content-Type", "text/plain; charset=utf-8"}
			resp, _ := r.do(t, http.MethodPut, "t", "", text...)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			res, err := http.Get(r.url + "t?offset=-1&live=sse")
			require.NoError(t, err)
			defer res.Body.Close()
			require.Equal(t, http.StatusOK, res.StatusCode)
			events := make(chan [2]string, 64) // event type, data
			go func() {
				defer close(events)
				sc := bufio.NewScanner(res.Body)
				sc.Buffer(nil, 1<<20)
				var typ string
				var data []string
				for sc.Scan() {
					line := sc.Text()
					switch {
					case strings.HasPrefix(line, "event: "):
						typ = strings.TrimPrefix(line, "event: ")
					case strings.HasPrefix(line, "data:"):
						data = append(data, strings.TrimPrefix(line, "data:"))
					case line == "" && typ != "":
						events <- [2]string{typ, strings.Join(data, "\n")}
						typ, data = "", nil
					}
				}
			}()
			next := func() [2]string {
				select {
				case ev := <-events:
					return ev
				case <-time.After(10 * time.Second):
					t.Fatal("no SSE event")
				}
				return [2]string{}
			}
			require.Equal(t, "control", next()[0], "the empty stream's first control event")
			for i, a := range tc.appends {
				hdr := text
				if i == len(tc.appends)-1 {
					hdr = append(hdr, "Stream-Closed", "true")
				}
				resp, _ := r.do(t, http.MethodPost, "t", a, hdr...)
				require.Equal(t, http.StatusNoContent, resp.StatusCode)
			}
			var got strings.Builder
			for {
				ev := next()
				if ev[0] == "data" {
					assert.True(t, utf8.ValidString(ev[1]), "a data event that is not UTF-8: %q", ev[1])
					got.WriteString(ev[1])
					continue
				}
				if strings.Contains(ev[1], `"streamClosed":true`) {
					break
				}
			}
			assert.Equal(t, tc.want, got.String(), "the text over SSE")

			resp, body := r.do(t, http.MethodGet, "t?offset=-1", "")
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, strings.Join(tc.appends, ""), body, "catch-up: the bytes as appended")
		})
	}
}

// A text stream of another charset than UTF-8 (text/plain;
// charset=iso-8859-1, shift_jis, utf-16) reads over SSE in base64 with
// Stream-SSE-Data-Encoding: base64, the bytes exactly as appended — its
// bytes are not UTF-8 text, and sent as text they became U+FFFD. A text
// stream of UTF-8, US-ASCII or no charset stays text.
func TestSSEOfATextStreamOfAnotherCharsetIsBase64(t *testing.T) {
	for _, tc := range []struct {
		ctype  string
		data   string
		base64 bool
	}{
		{"text/plain; charset=iso-8859-1", "caf\xe9 \xa3", true},
		{"text/plain; charset=Shift_JIS", "\x93\xfa\x96\x7b", true},
		{"text/csv; charset=utf-16le", "a\x00,\x00b\x00", true},
		{"text/plain; charset=UTF-8", "café", false},
		{"text/plain; charset=us-ascii", "plain", false},
		{"text/plain", "café", false},
	} {
		t.Run(tc.ctype, func(t *testing.T) {
			r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{})
			resp, _ := r.do(t, http.MethodPut, "t", tc.data, "Content-Type", tc.ctype)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			resp, _ = r.do(t, http.MethodPost, "t", "", "Stream-Closed", "true")
			require.Equal(t, http.StatusNoContent, resp.StatusCode)
			res, err := http.Get(r.url + "t?offset=-1&live=sse")
			require.NoError(t, err)
			defer res.Body.Close()
			require.Equal(t, http.StatusOK, res.StatusCode)
			body, err := io.ReadAll(res.Body) // the closed stream's answer ends
			require.NoError(t, err)
			var data []string
			for _, line := range strings.Split(string(body), "\n") {
				if d, ok := strings.CutPrefix(line, "data:"); ok && !strings.HasPrefix(d, "{") {
					data = append(data, d)
				}
			}
			got := strings.Join(data, "")
			if tc.base64 {
				assert.Equal(t, "base64", res.Header.Get("Stream-SSE-Data-Encoding"))
				raw, err := base64.StdEncoding.DecodeString(got)
				require.NoError(t, err, "%q", got)
				assert.Equal(t, tc.data, string(raw), "the bytes as appended")
			} else {
				assert.Empty(t, res.Header.Get("Stream-SSE-Data-Encoding"))
				assert.Equal(t, tc.data, got)
			}
		})
	}
}

// A character cut by a producer that never appends its rest is held for
// at most durable's hold bound (two seconds), not for the SSE answer's
// life: the held text then goes out with U+FFFD for the cut character and
// a control event after it, so a writer that stops mid-character cannot
// hold a live reader's data back. Before, it waited for the rest until
// the answer ended (SSEDuration, a minute), and nothing after it in the
// stream went out either.
func TestSSEHoldOfACutCharacterIsBounded(t *testing.T) {
	r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{})
	text := []string{"Content-Type", "text/plain; charset=utf-8"}
	resp, _ := r.do(t, http.MethodPut, "t", "", text...)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+"t?offset=-1&live=sse", nil)
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	events := make(chan [2]string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(res.Body)
		var typ string
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				typ = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data:"):
				data = append(data, strings.TrimPrefix(line, "data:"))
			case line == "" && typ != "":
				events <- [2]string{typ, strings.Join(data, "\n")}
				typ, data = "", nil
			}
		}
	}()
	next := func(within time.Duration) [2]string {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(within):
			t.Fatalf("no SSE event within %v", within)
		}
		return [2]string{}
	}
	require.Equal(t, "control", next(10 * time.Second)[0])
	resp, _ = r.do(t, http.MethodPost, "t", "caf\xc3", text...)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	tail := resp.Header.Get("Stream-Next-Offset")
	ev := next(10 * time.Second) // far below the answer's minute
	require.Equal(t, "data", ev[0])
	assert.Equal(t, "caf\uFFFD", ev[1], "the held text, the cut character as U+FFFD")
	ev = next(10 * time.Second)
	require.Equal(t, "control", ev[0])
	assert.Contains(t, ev[1], `"streamNextOffset":"`+tail+`"`, "the offset after the append sent")
	resp, _ = r.do(t, http.MethodPost, "t", "\xa9 ok", text...)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	ev = next(10 * time.Second)
	require.Equal(t, "data", ev[0])
	assert.Equal(t, "\uFFFD ok", ev[1], "the rest, late: valid UTF-8 still")
	cancel()
}
