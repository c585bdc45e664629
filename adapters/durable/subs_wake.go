package durable

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

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

// pendingLocked returns the tails of s's streams with data past their ack
// (each the bus's newest id of the stream's session: what other routes
// published is pending too, though only appends through this handler wake).
func (h *Handler) pendingLocked(s *subscription) map[string]uint64 {
	out := map[string]uint64{}
	for p, l := range s.links {
		st, ok := h.streams.Load(p)
		if !ok {
			continue
		}
		if t := h.tail(st); t > l.acked {
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
	out := make([]map[string]any, 0, len(s.snapshot))
	for _, p := range slices.Sorted(maps.Keys(s.snapshot)) {
		l := s.links[p]
		acked := uint64(0)
		if l != nil {
			acked = l.acked
		}
		out = append(out, map[string]any{"path": p, "link_type": l.linkType(), "acked_offset": h.offset(acked),
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
		req = req.WithContext(webhookContext(req.Context(), req))
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
		subError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no subscription %s", quote(id)), nil)
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
	body, ok := h.subBody(w, r)
	if !ok {
		return
	}
	if err := json.Unmarshal(body, &req); err != nil && len(bytes.TrimSpace(body)) > 0 {
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
			subError(w, http.StatusBadRequest, "INVALID_OFFSET", fmt.Sprintf("ack offset %s is not an offset of this server", quote(a.Offset)), nil)
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
