package durable

import (
	"encoding/json"
	"fmt"

	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// checkWebhookURL refuses a webhook URL that could reach a private network
// (PROTOCOL.md §12.8): https to a host that is not a private, loopback or
// link-local literal address, or http to localhost / 127.0.0.x only.
func checkWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("webhook url %s does not parse as an absolute URL", quote(raw))
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	switch u.Scheme {
	case "http":
		if host == "localhost" || ip != nil && ip.To4() != nil && ip.To4()[0] == 127 && ip.To4()[1] == 0 && ip.To4()[2] == 0 {
			return nil
		}
		return fmt.Errorf("webhook url %s: plain http is allowed for localhost and 127.0.0.x only", quote(raw))
	case "https":
		if host == "localhost" || ip != nil && (ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() ||
			ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast()) {
			return fmt.Errorf("webhook url %s names a local or private address", quote(raw))
		}
		return nil
	}
	return fmt.Errorf("webhook url %s: scheme must be https (or http for localhost)", quote(raw))
}

// putSub serves PUT …/__ds/subscriptions/{id}: create (201) or re-confirm
// an identical configuration (200); another configuration is 409.
func (h *Handler) putSub(w http.ResponseWriter, r *http.Request, id string) {
	var c subConfig
	body, ok := h.subBody(w, r)
	if !ok {
		return
	}
	if err := json.Unmarshal(body, &c); err != nil {
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
			subError(w, http.StatusConflict, "CONFLICT", fmt.Sprintf("subscription %s exists with another configuration", quote(id)), nil)
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
		s.links[p] = &subLink{explicit: true, acked: h.tailID(p)}
	}
	if c.Pattern != "" { // backfill: existing streams at their tail
		h.streams.Range(func(name string, _ *stream) bool {
			if globMatch(c.Pattern, name) {
				if l := s.links[name]; l != nil {
					l.glob = true
				} else {
					s.links[name] = &subLink{glob: true, acked: h.tailID(name)}
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
		return fmt.Sprintf("type %s is not webhook or pull-wake", quote(c.Type))
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
func (h *Handler) tailID(name string) uint64 {
	s, ok := h.streams.Load(name)
	if !ok {
		return 0
	}
	return h.tail(s)
}

// subView is a subscription's JSON (PROTOCOL.md §6.3). s.mu held.
func (h *Handler) subView(s *subscription) map[string]any {
	streams := make([]map[string]any, 0, len(s.links))
	for _, p := range slices.Sorted(maps.Keys(s.links)) {
		l := s.links[p]
		streams = append(streams, map[string]any{"path": p, "link_type": l.linkType(), "acked_offset": h.offset(l.acked)})
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
		subError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no subscription %s", quote(id)), nil)
		return
	}
	var req struct {
		Streams []string `json:"streams"`
	}
	body, ok := h.subBody(w, r)
	if !ok {
		return
	}
	if err := json.Unmarshal(body, &req); err != nil {
		subError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Sprintf("the body is not {\"streams\":[…]}: %v", err), nil)
		return
	}
	s.mu.Lock()
	for _, p := range req.Streams {
		if l := s.links[p]; l != nil {
			l.explicit = true
		} else {
			s.links[p] = &subLink{explicit: true, acked: h.tailID(p)}
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
