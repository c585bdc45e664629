package durable_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/eventbus"
)

// A webhook subscription: an append to a matching stream is posted to the
// receiver, signed with the key the JWKS publishes; answering
// {"done":true} acknowledges the wake's tails.
func TestWebhookSubscription(t *testing.T) {
	type hook struct {
		sig  string
		body []byte
	}
	got := make(chan hook, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- hook{r.Header.Get("Webhook-Signature"), b}
		_, _ = w.Write([]byte(`{"done":true}`))
	}))
	defer recv.Close()
	r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{Subscriptions: true})
	defer r.h.Close()

	resp, body := r.do(t, http.MethodPut, "__ds/subscriptions/s1",
		`{"type":"webhook","pattern":"events/*","webhook":{"url":"`+recv.URL+`"},"lease_ttl_ms":1000}`,
		"Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	var created struct {
		Webhook struct {
			Signing struct {
				Kid     string `json:"kid"`
				JWKSURL string `json:"jwks_url"`
			} `json:"signing"`
		} `json:"webhook"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	assert.Equal(t, r.url+"__ds/jwks.json", created.Webhook.Signing.JWKSURL)
	_, jwks := r.do(t, http.MethodGet, "__ds/jwks.json", "")
	var keys struct {
		Keys []struct{ Kid, X string } `json:"keys"`
	}
	require.NoError(t, json.Unmarshal([]byte(jwks), &keys))
	require.Len(t, keys.Keys, 1)
	pub, err := base64.RawURLEncoding.DecodeString(keys.Keys[0].X)
	require.NoError(t, err)

	resp, _ = r.do(t, http.MethodPut, "events/a", `{"n":1}`, "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	tail := resp.Header.Get("Stream-Next-Offset")
	var h hook
	select {
	case h = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook")
	}
	// t=<ts>,kid=<kid>,ed25519=<sig>: the signature covers "<ts>.<body>".
	parts := strings.Split(h.sig, ",")
	require.Len(t, parts, 3, h.sig)
	ts, kid, sig := strings.TrimPrefix(parts[0], "t="), strings.TrimPrefix(parts[1], "kid="), strings.TrimPrefix(parts[2], "ed25519=")
	assert.Equal(t, keys.Keys[0].Kid, kid)
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	require.NoError(t, err)
	assert.True(t, ed25519.Verify(pub, []byte(ts+"."+string(h.body)), raw), "signature")
	var wake struct {
		Streams []struct {
			Path       string `json:"path"`
			TailOffset string `json:"tail_offset"`
		} `json:"streams"`
	}
	require.NoError(t, json.Unmarshal(h.body, &wake))
	require.Len(t, wake.Streams, 1)
	assert.Equal(t, tail, wake.Streams[0].TailOffset)

	require.Eventually(t, func() bool {
		_, b := r.do(t, http.MethodGet, "__ds/subscriptions/s1", "")
		return strings.Contains(b, `"acked_offset":"`+tail+`"`)
	}, 10*time.Second, 5*time.Millisecond, "done acknowledged the tail")

	// An unsafe URL is refused naming it.
	resp, body = r.do(t, http.MethodPut, "__ds/subscriptions/s2",
		`{"type":"webhook","pattern":"x/*","webhook":{"url":"http://10.0.0.1/hook"}}`, "Content-Type", "application/json")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, body, "WEBHOOK_URL_REJECTED")
	assert.Contains(t, body, "10.0.0.1")
}

// A pull-wake subscription writes a wake event into its wake stream; one
// worker claims, another is told who holds it; the ack releases, and a
// stale ack is fenced.
func TestPullWakeSubscription(t *testing.T) {
	r := newRig(t, eventbus.Options{Epoch: "e1"}, durable.HandlerOptions{Subscriptions: true})
	defer r.h.Close()
	ct := []string{"Content-Type", "application/json"}
	resp, _ := r.do(t, http.MethodPut, "wake", `[]`, ct...)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp, body := r.do(t, http.MethodPut, "__ds/subscriptions/p1",
		`{"type":"pull-wake","pattern":"events/*","wake_stream":"wake","lease_ttl_ms":60000}`, ct...)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	resp, _ = r.do(t, http.MethodPut, "events/x", `{"n":1}`, ct...)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	tail := resp.Header.Get("Stream-Next-Offset")

	_, wakes := r.do(t, http.MethodGet, "wake", "")
	assert.Contains(t, wakes, `"subscription_id":"p1"`)
	resp, body = r.do(t, http.MethodPost, "__ds/subscriptions/p1/claim", `{"worker":"w1"}`, ct...)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var claim struct {
		WakeID     string `json:"wake_id"`
		Generation int64  `json:"generation"`
		Token      string `json:"token"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &claim))
	resp, body = r.do(t, http.MethodPost, "__ds/subscriptions/p1/claim", `{"worker":"w2"}`, ct...)
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
	assert.Contains(t, body, `"current_holder":"w1"`)

	ack := `{"wake_id":"` + claim.WakeID + `","generation":` + itoa(claim.Generation) +
		`,"acks":[{"stream":"events/x","offset":"` + tail + `"}],"done":true}`
	resp, body = r.do(t, http.MethodPost, "__ds/subscriptions/p1/ack", ack, append(ct, "Authorization", "Bearer "+claim.Token)...)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.JSONEq(t, `{"ok":true,"next_wake":false}`, body)
	resp, body = r.do(t, http.MethodPost, "__ds/subscriptions/p1/ack", ack, append(ct, "Authorization", "Bearer "+claim.Token)...)
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
	assert.Contains(t, body, "FENCED")
}

// Without HandlerOptions.Subscriptions the reserved paths answer 501.
func TestSubscriptionsOffBy501(t *testing.T) {
	r := newRig(t, eventbus.Options{}, durable.HandlerOptions{})
	resp, body := r.do(t, http.MethodPut, "__ds/subscriptions/s1", `{}`, "Content-Type", "application/json")
	assert.Equal(t, http.StatusNotImplemented, resp.StatusCode)
	assert.Contains(t, body, "Subscriptions")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
