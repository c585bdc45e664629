package durable

import (
	"bytes"
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
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
		ctx: ctx, cancel: cancel, client: &http.Client{Timeout: webhookTimeout}}
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
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
			subError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no subscription %q", id), nil)
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
			subError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no subscription %q", id), nil)
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
		subError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", fmt.Sprintf("%s not allowed here", r.Method), nil)
	}
}

func (h *Handler) sub(id string) *subscription {
	h.subs.mu.Lock()
	defer h.subs.mu.Unlock()
	return h.subs.subs[id]
}

// checkWebhookURL refuses a webhook URL that could reach a private network
// (PROTOCOL.md §12.8): https to a host that is not a private, loopback or
// link-local literal address, or http to localhost / 127.0.0.x only.
func checkWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("webhook url %q does not parse as an absolute URL", raw)
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	switch u.Scheme {
	case "http":
		if host == "localhost" || ip != nil && ip.To4() != nil && ip.To4()[0] == 127 && ip.To4()[1] == 0 && ip.To4()[2] == 0 {
			return nil
		}
		return fmt.Errorf("webhook url %q: plain http is allowed for localhost and 127.0.0.x only", raw)
	case "https":
		if host == "localhost" || ip != nil && (ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() ||
			ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast()) {
			return fmt.Errorf("webhook url %q names a local or private address", raw)
		}
		return nil
	}
	return fmt.Errorf("webhook url %q: scheme must be https (or http for localhost)", raw)
}

// putSub serves PUT …/__ds/subscriptions/{id}: create (201) or re-confirm
// an identical configuration (200); another configuration is 409.
func (h *Handler) putSub(w http.ResponseWriter, r *http.Request, id string) {
	var c subConfig
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &c)
	}
	if err != nil {
		subError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Sprintf("the body is not a subscription: %v", err), nil)
		return
	}
	if msg := c.validate(); msg != "" {
		subError(w, http.StatusBadRequest, "INVALID_REQUEST", msg, nil)
		return
	}
	if c.Type == "webhook" {
		if err := checkWebhookURL(c.Webhook.URL); err != nil {
			subError(w, http.StatusBadRequest, "WEBHOOK_URL_REJECTED", err.Error(), nil)
			return
		}
	}
	slices.Sort(c.Streams)
	c.Streams = slices.Compact(c.Streams)
	if c.LeaseTTLMS == 0 {
		c.LeaseTTLMS = defaultLeaseTTL.Milliseconds()
	}
	key, _ := json.Marshal(c)
	h.subs.mu.Lock()
	if s := h.subs.subs[id]; s != nil {
		h.subs.mu.Unlock()
		if s.key != string(key) {
			subError(w, http.StatusConflict, "CONFLICT", fmt.Sprintf("subscription %q exists with another configuration", id), nil)
			return
		}
		s.mu.Lock()
		v := h.subView(s)
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, v)
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	s := &subscription{id: id, cfg: c, key: string(key), base: scheme + "://" + r.Host, created: time.Now().UTC(),
		links: map[string]*subLink{}}
	h.subs.subs[id] = s
	h.subs.mu.Unlock()
	s.mu.Lock()
	for _, p := range c.Streams {
		s.links[p] = &subLink{explicit: true, acked: h.tailID(r.Context(), p)}
	}
	if c.Pattern != "" { // backfill: existing streams at their tail
		h.streams.Range(func(name string, _ *stream) bool {
			if globMatch(c.Pattern, name) {
				if l := s.links[name]; l != nil {
					l.glob = true
				} else {
					s.links[name] = &subLink{glob: true, acked: h.tailID(r.Context(), name)}
				}
			}
			return true
		})
	}
	v := h.subView(s)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, v)
}

// validate returns what is wrong with c, or "".
func (c *subConfig) validate() string {
	switch c.Type {
	case "webhook":
		if c.Webhook == nil || c.Webhook.URL == "" {
			return "a webhook subscription needs webhook.url"
		}
	case "pull-wake":
		if c.WakeStream == "" {
			return "a pull-wake subscription needs wake_stream"
		}
	default:
		return fmt.Sprintf("type %q is not webhook or pull-wake", c.Type)
	}
	if c.Pattern == "" && len(c.Streams) == 0 {
		return "give pattern or streams"
	}
	if c.LeaseTTLMS != 0 && (c.LeaseTTLMS < minLeaseTTL.Milliseconds() || c.LeaseTTLMS > maxLeaseTTL.Milliseconds()) {
		return fmt.Sprintf("lease_ttl_ms %d is outside 1000–600000", c.LeaseTTLMS)
	}
	return ""
}

// tailID is stream name's tail offset id, 0 when there is no such stream.
func (h *Handler) tailID(ctx context.Context, name string) uint64 {
	s, ok := h.streams.Load(name)
	if !ok {
		return 0
	}
	t, err := h.tailOf(ctx, s)
	if err != nil {
		return s.tail.Load()
	}
	return t
}

// subView is a subscription's JSON (PROTOCOL.md §6.3). s.mu held.
func (h *Handler) subView(s *subscription) map[string]any {
	paths := make([]string, 0, len(s.links))
	for p := range s.links {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	streams := make([]map[string]any, 0, len(paths))
	for _, p := range paths {
		l := s.links[p]
		lt := "glob"
		if l.explicit {
			lt = "explicit"
		}
		streams = append(streams, map[string]any{"path": p, "link_type": lt, "acked_offset": h.offset(l.acked)})
	}
	v := map[string]any{"id": s.id, "subscription_id": s.id, "type": s.cfg.Type, "streams": streams,
		"lease_ttl_ms": s.cfg.LeaseTTLMS, "created_at": s.created.Format(time.RFC3339Nano),
		"status": "active", "webhook": nil, "wake_stream": nil}
	if s.failed {
		v["status"] = "failed"
	}
	if s.cfg.Pattern != "" {
		v["pattern"] = s.cfg.Pattern
	}
	if s.cfg.Description != "" {
		v["description"] = s.cfg.Description
	}
	if s.cfg.Webhook != nil {
		v["webhook"] = map[string]any{"url": s.cfg.Webhook.URL, "signing": map[string]string{
			"alg": "ed25519", "kid": h.subs.kid, "jwks_url": s.base + h.opts.Prefix + "__ds/jwks.json"}}
	}
	if s.cfg.WakeStream != "" {
		v["wake_stream"] = s.cfg.WakeStream
	}
	return v
}

// addSubStreams serves POST …/{id}/streams: explicit links at the tail.
func (h *Handler) addSubStreams(w http.ResponseWriter, r *http.Request, id string) {
	s := h.sub(id)
	if s == nil {
		subError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no subscription %q", id), nil)
		return
	}
	var req struct {
		Streams []string `json:"streams"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		subError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Sprintf("the body is not {\"streams\":[…]}: %v", err), nil)
		return
	}
	s.mu.Lock()
	for _, p := range req.Streams {
		if l := s.links[p]; l != nil {
			l.explicit = true
		} else {
			s.links[p] = &subLink{explicit: true, acked: h.tailID(r.Context(), p)}
		}
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// globMatch matches a stream path against a pattern: "*" is one path
// segment, "**" zero or more.
func globMatch(pattern, path string) bool {
	return globSegs(strings.Split(pattern, "/"), strings.Split(path, "/"))
}

func globSegs(p, s []string) bool {
	for len(p) > 0 {
		if p[0] == "**" {
			for i := 0; i <= len(s); i++ {
				if globSegs(p[1:], s[i:]) {
					return true
				}
			}
			return false
		}
		if len(s) == 0 || p[0] != "*" && p[0] != s[0] {
			return false
		}
		p, s = p[1:], s[1:]
	}
	return len(s) == 0
}

// notifySubs tells the subscriptions that stream name was appended to
// (before is its tail before the append): a matching pattern links it
// there, and a subscription with pending work is woken.
func (h *Handler) notifySubs(name string, before uint64) {
	if h.subs == nil {
		return
	}
	h.subs.mu.Lock()
	subs := make([]*subscription, 0, len(h.subs.subs))
	for _, s := range h.subs.subs {
		subs = append(subs, s)
	}
	h.subs.mu.Unlock()
	for _, s := range subs {
		s.mu.Lock()
		l := s.links[name]
		if l == nil && s.cfg.Pattern != "" && globMatch(s.cfg.Pattern, name) {
			l = &subLink{glob: true, acked: before}
			s.links[name] = l
		}
		if l != nil {
			h.wakeLocked(s)
		}
		s.mu.Unlock()
	}
}

// pendingLocked returns the tails of s's streams with data past their ack.
func (h *Handler) pendingLocked(s *subscription) map[string]uint64 {
	out := map[string]uint64{}
	for p, l := range s.links {
		st, ok := h.streams.Load(p)
		if !ok {
			continue
		}
		if t := st.tail.Load(); t > l.acked {
			out[p] = t
		}
	}
	return out
}

// wakeLocked issues a wake when s is idle and has pending work: a new
// generation and wake id, then a webhook (with its lease) or a wake event
// in the pull-wake stream. s.mu held.
func (h *Handler) wakeLocked(s *subscription) bool {
	if s.deleted || s.inFlight || s.holder != "" {
		return false
	}
	pending := h.pendingLocked(s)
	if len(pending) == 0 {
		return false
	}
	s.gen++
	s.wakeID, s.inFlight, s.snapshot, s.attempt = "w_"+randHex(8), true, pending, 0
	if s.cfg.Type == "webhook" {
		s.token = randHex(24)
		h.leaseLocked(s)
		h.sendWebhookLocked(s)
		return true
	}
	s.token = ""
	h.writeWakeLocked(s)
	return true
}

// leaseLocked (re)starts s's lease; at its end the wake or claim is
// dropped and pending work wakes again.
func (h *Handler) leaseLocked(s *subscription) {
	s.stopTimerLocked()
	gen := s.gen
	s.timer = time.AfterFunc(time.Duration(s.cfg.LeaseTTLMS)*time.Millisecond, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.gen != gen || s.deleted {
			return
		}
		s.inFlight, s.holder, s.token = false, "", ""
		h.wakeLocked(s)
	})
}

func (s *subscription) stopTimerLocked() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// streamsJSON is the wake's stream list. s.mu held.
func (h *Handler) streamsJSON(s *subscription) []map[string]any {
	paths := make([]string, 0, len(s.snapshot))
	for p := range s.snapshot {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	out := make([]map[string]any, 0, len(paths))
	for _, p := range paths {
		l := s.links[p]
		lt, acked := "glob", uint64(0)
		if l != nil {
			acked = l.acked
			if l.explicit {
				lt = "explicit"
			}
		}
		out = append(out, map[string]any{"path": p, "link_type": lt, "acked_offset": h.offset(acked),
			"tail_offset": h.offset(s.snapshot[p]), "has_pending": s.snapshot[p] > acked})
	}
	return out
}

// sendWebhookLocked posts the current wake, signed, from a goroutine.
func (h *Handler) sendWebhookLocked(s *subscription) {
	body, _ := json.Marshal(map[string]any{
		"subscription_id": s.id, "wake_id": s.wakeID, "generation": s.gen, "streams": h.streamsJSON(s),
		"callback_url":   s.base + h.opts.Prefix + "__ds/subscriptions/" + s.id + "/callback",
		"callback_token": s.token,
	})
	gen, target := s.gen, s.cfg.Webhook.URL
	h.subs.wg.Add(1)
	go func() {
		defer h.subs.wg.Done()
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		sig := ed25519.Sign(h.subs.key, []byte(ts+"."+string(body)))
		req, err := http.NewRequestWithContext(h.subs.ctx, http.MethodPost, target, bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Webhook-Signature", "t="+ts+",kid="+h.subs.kid+",ed25519="+base64.RawURLEncoding.EncodeToString(sig))
		resp, err := h.subs.client.Do(req)
		var reply struct {
			Done bool `json:"done"`
		}
		ok := err == nil && resp.StatusCode/100 == 2
		if err == nil {
			_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&reply)
			_ = resp.Body.Close()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.gen != gen || s.deleted || !s.inFlight || h.subs.ctx.Err() != nil {
			return
		}
		switch {
		case ok && reply.Done:
			s.failed = false
			h.finishLocked(s, nil)
		case ok:
			s.failed = false // the receiver calls back within the lease
		default:
			s.failed = true
			s.attempt++
			d := min(retryFirst<<min(s.attempt-1, 6), retryMax)
			d += time.Duration(rand.Int64N(int64(d) / 5))
			s.stopTimerLocked()
			s.timer = time.AfterFunc(d, func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				if s.gen == gen && s.inFlight && !s.deleted {
					h.leaseLocked(s)
					h.sendWebhookLocked(s)
				}
			})
		}
	}()
}

// finishLocked ends the current wake: it applies acks (nil: the snapshot's
// tails, a webhook's synchronous done), releases the lease and wakes again
// when work is pending. It reports whether a new wake was issued.
func (h *Handler) finishLocked(s *subscription, acks map[string]uint64) bool {
	if acks == nil {
		acks = s.snapshot
	}
	for p, off := range acks {
		if l := s.links[p]; l != nil && off > l.acked {
			l.acked = off
		}
	}
	s.stopTimerLocked()
	s.inFlight, s.holder, s.token, s.snapshot = false, "", "", nil
	return h.wakeLocked(s)
}

// writeWakeLocked appends a wake event per pending stream to the
// pull-wake subscription's wake stream (it must exist).
func (h *Handler) writeWakeLocked(s *subscription) {
	ws, ok := h.streams.Load(s.cfg.WakeStream)
	if !ok {
		return
	}
	for p := range s.snapshot {
		ev, _ := json.Marshal(map[string]any{"type": "wake", "subscription_id": s.id, "stream": p,
			"generation": s.gen, "ts": time.Now().UnixMilli()})
		ws.mu.Lock()
		if !ws.closed.Load() {
			if ws.json {
				_, _ = h.publish(ws, ev)
			} else {
				_, _ = h.publish(ws, append(ev, '\n'))
			}
		}
		ws.mu.Unlock()
	}
}

// subAction serves callback (webhook), claim, ack and release (pull-wake).
func (h *Handler) subAction(w http.ResponseWriter, r *http.Request, id, action string) {
	s := h.sub(id)
	if s == nil {
		subError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no subscription %q", id), nil)
		return
	}
	var req struct {
		Worker     string `json:"worker"`
		WakeID     string `json:"wake_id"`
		Generation int64  `json:"generation"`
		Acks       []struct {
			Stream string `json:"stream"`
			Offset string `json:"offset"`
		} `json:"acks"`
		Done bool `json:"done"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil && err != io.EOF {
		subError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Sprintf("the body does not parse: %v", err), nil)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if action == "claim" {
		if s.cfg.Type != "pull-wake" {
			subError(w, http.StatusBadRequest, "INVALID_REQUEST", "claim is for pull-wake subscriptions", nil)
			return
		}
		if s.holder != "" {
			subError(w, http.StatusConflict, "ALREADY_CLAIMED", "another worker holds the lease",
				map[string]any{"current_holder": s.holder, "generation": s.gen})
			return
		}
		if !s.inFlight && !h.wakeLocked(s) {
			subError(w, http.StatusConflict, "NO_PENDING_WORK", "no linked stream has data past its ack", nil)
			return
		}
		if req.Worker == "" {
			req.Worker = "worker"
		}
		s.holder, s.token = req.Worker, randHex(24)
		h.leaseLocked(s)
		writeJSON(w, http.StatusOK, map[string]any{"wake_id": s.wakeID, "generation": s.gen, "token": s.token,
			"streams": h.streamsJSON(s), "lease_ttl_ms": s.cfg.LeaseTTLMS})
		return
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		subError(w, http.StatusUnauthorized, "UNAUTHORIZED", "a Bearer token is needed", nil)
		return
	}
	if s.token == "" || tok != s.token || req.Generation != s.gen || req.WakeID != s.wakeID {
		subError(w, http.StatusConflict, "FENCED", "the wake or its generation is no longer current", nil)
		return
	}
	if action == "release" {
		h.finishLocked(s, map[string]uint64{})
		w.WriteHeader(http.StatusNoContent)
		return
	}
	acks := map[string]uint64{}
	for _, a := range req.Acks {
		p, err := ParseOffset(a.Offset)
		if err != nil || p.Epoch != h.epoch && p.ID != 0 {
			subError(w, http.StatusBadRequest, "INVALID_OFFSET", fmt.Sprintf("ack offset %q is not an offset of this server", a.Offset), nil)
			return
		}
		acks[a.Stream] = p.ID
	}
	if !req.Done { // a heartbeat: apply, extend the lease
		for p, off := range acks {
			if l := s.links[p]; l != nil && off > l.acked {
				l.acked = off
			}
		}
		h.leaseLocked(s)
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "next_wake": false})
		return
	}
	next := h.finishLocked(s, acks)
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "next_wake": next})
}

// Close stops the subscriptions' webhook deliveries and lease timers and
// waits for deliveries in flight (bounded by their 10 s timeout). The
// streams keep working; it is idempotent and returns nil. Call it when
// the server shuts down (the example server's Close does).
func (h *Handler) Close() error {
	if h.subs == nil {
		return nil
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
	h.subs.wg.Wait()
	return nil
}
