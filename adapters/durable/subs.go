package durable

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/replaybus/replaybus/internal/textutil"
)

// Subscriptions (PROTOCOL.md §6–7), served below <prefix>__ds/ when
// HandlerOptions.Subscriptions is set: durable cursors over the streams a
// glob pattern or an explicit list names, which wake a worker (a signed
// webhook, or a wake event in a pull-wake stream) when a linked stream
// holds data past its acknowledged offset. They see the appends made
// through this handler.

// Subscription bounds (PROTOCOL.md §6.2, §7.1).
const (
	defaultLeaseTTL = 30 * time.Second
	minLeaseTTL     = time.Second
	maxLeaseTTL     = 10 * time.Minute
	webhookTimeout  = 10 * time.Second
	retryFirst      = time.Second
	retryMax        = time.Minute
)

// subConfig is a subscription's configuration as a client sends it.
type subConfig struct {
	Type        string      `json:"type"`
	Pattern     string      `json:"pattern,omitempty"`
	Streams     []string    `json:"streams,omitempty"`
	Webhook     *webhookCfg `json:"webhook,omitempty"`
	WakeStream  string      `json:"wake_stream,omitempty"`
	LeaseTTLMS  int64       `json:"lease_ttl_ms,omitempty"`
	Description string      `json:"description,omitempty"`
}

type webhookCfg struct {
	URL string `json:"url"`
}

// subLink is one stream a subscription follows.
type subLink struct {
	explicit, glob bool
	acked          uint64 // last processed offset id, inclusive
}

// linkType is the link's link_type (PROTOCOL.md §6.3): "explicit" for a
// stream the subscription names, else "glob" (also for nil, a link dropped
// since the wake began).
func (l *subLink) linkType() string {
	if l != nil && l.explicit {
		return "explicit"
	}
	return "glob"
}

// subscription is one subscription's state.
type subscription struct {
	id      string
	cfg     subConfig
	key     string // the normalised configuration, for idempotent PUT
	base    string // scheme://host of the creating request, for URLs
	created time.Time

	mu       sync.Mutex
	links    map[string]*subLink
	gen      int64
	wakeID   string
	token    string
	holder   string            // pull-wake: the worker holding the lease
	inFlight bool              // a wake is issued and not finished
	snapshot map[string]uint64 // tails in the current wake
	timer    *time.Timer       // lease expiry or webhook retry
	attempt  int
	failed   bool
	deleted  bool
}

// subsState is the handler's subscription registry and signing key.
type subsState struct {
	mu     sync.Mutex
	subs   map[string]*subscription
	key    ed25519.PrivateKey
	kid    string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	client *http.Client
}

func newSubsState() *subsState {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &subsState{subs: map[string]*subscription{}, key: key, kid: "ds_" + randHex(8),
		ctx: ctx, cancel: cancel, client: webhookClient()}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// subError writes the subscription APIs' error shape {"error":{"code",…}}.
func subError(w http.ResponseWriter, status int, code, msg string, extra map[string]any) {
	e := map[string]any{"code": code, "message": msg}
	for k, v := range extra {
		e[k] = v
	}
	writeJSON(w, status, map[string]any{"error": e})
}

// maxSubBody bounds a subscription API's request body.
const maxSubBody = 1 << 20

// subBody reads a subscription API's body as readBody does (the write
// deadline starts when it is in; 408 for a body that never finishes, 413
// over maxSubBody) and, when it fails, answers in the APIs' shape
// (REQUEST_TIMEOUT, PAYLOAD_TOO_LARGE, INVALID_REQUEST) and returns false.
func (h *Handler) subBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := h.readBody(w, r, maxSubBody)
	if err == nil {
		return b, true
	}
	se := h.statusOf(err, "", r.Method)
	code := map[string]string{"request_timeout": "REQUEST_TIMEOUT", "body_too_large": "PAYLOAD_TOO_LARGE"}[se.Code]
	if code == "" {
		code = "INVALID_REQUEST"
	}
	for k, v := range se.Header {
		w.Header()[k] = v
	}
	h.cnt.rejected.Add(1)
	subError(w, se.Status, code, se.Message, nil)
	return nil, false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := textutil.MarshalJSON(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// serveDS serves the reserved control paths below <prefix>__ds/.
func (h *Handler) serveDS(w http.ResponseWriter, r *http.Request, rest string) {
	if rest == "jwks.json" && r.Method == http.MethodGet {
		pub := h.subs.key.Public().(ed25519.PublicKey)
		w.Header().Set("Cache-Control", "public, max-age=300")
		b, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
			"kty": "OKP", "crv": "Ed25519", "kid": h.subs.kid, "use": "sig", "alg": "EdDSA",
			"x": base64.RawURLEncoding.EncodeToString(pub)}}})
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(b)
		return
	}
	rest, ok := strings.CutPrefix(rest, "subscriptions/")
	if !ok || rest == "" {
		subError(w, http.StatusNotFound, "NOT_FOUND", "no control API at this path", nil)
		return
	}
	id, sub, _ := strings.Cut(rest, "/")
	switch {
	case sub == "" && r.Method == http.MethodPut:
		h.putSub(w, r, id)
	case sub == "" && r.Method == http.MethodGet:
		if s := h.sub(id); s != nil {
			s.mu.Lock()
			v := h.subView(s)
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, v)
		} else {
			subError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no subscription %s", quote(id)), nil)
		}
	case sub == "" && r.Method == http.MethodDelete:
		h.subs.mu.Lock()
		s := h.subs.subs[id]
		delete(h.subs.subs, id)
		h.subs.mu.Unlock()
		if s != nil {
			s.mu.Lock()
			s.deleted = true
			s.stopTimerLocked()
			s.token = ""
			s.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	case sub == "streams" && r.Method == http.MethodPost:
		h.addSubStreams(w, r, id)
	case strings.HasPrefix(sub, "streams/") && r.Method == http.MethodDelete:
		s := h.sub(id)
		if s == nil {
			subError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no subscription %s", quote(id)), nil)
			return
		}
		path := strings.TrimPrefix(sub, "streams/")
		s.mu.Lock()
		if l := s.links[path]; l != nil {
			l.explicit = false
			if !l.glob {
				delete(s.links, path)
			}
		}
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case (sub == "callback" || sub == "ack" || sub == "release" || sub == "claim") && r.Method == http.MethodPost:
		h.subAction(w, r, id, sub)
	default:
		subError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", fmt.Sprintf("%s not allowed here", quote(r.Method)), nil)
	}
}

func (h *Handler) sub(id string) *subscription {
	h.subs.mu.Lock()
	defer h.subs.mu.Unlock()
	return h.subs.subs[id]
}

// stopSubs stops the subscriptions' webhook deliveries (their requests
// are cancelled) and lease timers; Handler.Close calls it, Shutdown waits
// for the deliveries to return.
func (h *Handler) stopSubs() {
	if h.subs == nil {
		return
	}
	h.subs.cancel()
	h.subs.mu.Lock()
	for _, s := range h.subs.subs {
		s.mu.Lock()
		s.stopTimerLocked()
		s.deleted = true
		s.mu.Unlock()
	}
	h.subs.mu.Unlock()
}
