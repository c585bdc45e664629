package ws

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/coder/websocket"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/internal/textutil"
)

// Error codes of the JSON refusals the handler gives to a request that is
// not an acceptable WebSocket handshake, before anything is subscribed
// (the other codes are the SSE endpoint's, see resume.CodeInvalidScope and
// its siblings).
const (
	// CodeUpgradeRequired answers 426 (with Upgrade: websocket over
	// HTTP/1.1) a request that is not a WebSocket handshake: no
	// "Connection: upgrade" and "Upgrade: websocket", HTTP/1.0, or HTTP/2
	// (RFC 8441 WebSocket over HTTP/2 is not supported).
	CodeUpgradeRequired = "upgrade_required"
	// CodeUnsupportedVersion answers 400, with Sec-WebSocket-Version: 13, a
	// Sec-WebSocket-Version other than 13 (RFC 6455 §4.2.2, §4.4).
	CodeUnsupportedVersion = "unsupported_websocket_version"
	// CodeInvalidHandshake answers 400 a missing, repeated or malformed
	// Sec-WebSocket-Key (RFC 6455 §4.2.1), or a repeated Origin header.
	CodeInvalidHandshake = "invalid_handshake"
	// CodeForbiddenOrigin answers 403 a page whose Origin is neither the
	// request's host nor allowed by HandlerOptions.Accept.OriginPatterns.
	CodeForbiddenOrigin = "forbidden_origin"
)

// checkHandshake checks what coder/websocket's Accept checks — the upgrade
// headers, the version, the key and the origin, by the same rules (v1.8.15's
// verifyClientRequest and authenticateOrigin) — so that a refusal is the
// project's JSON answer, given before anything is subscribed, and Accept,
// called later on the same request, finds nothing to refuse. It returns
// the refusal, with any headers it needs set on w, or nil.
func checkHandshake(w http.ResponseWriter, r *http.Request, ao *websocket.AcceptOptions) error {
	bad := func(status int, code, format string, args ...any) error {
		return &resume.StatusError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case r.ProtoMajor >= 2:
		// No Upgrade header: it is connection-specific, which HTTP/2
		// forbids.
		return bad(http.StatusUpgradeRequired, CodeUpgradeRequired,
			"a WebSocket needs an HTTP/1.1 connection (got %s; WebSocket over HTTP/2, RFC 8441, is not supported)", r.Proto)
	case !r.ProtoAtLeast(1, 1):
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Connection", "Upgrade")
		return bad(http.StatusUpgradeRequired, CodeUpgradeRequired, "a WebSocket needs HTTP/1.1 (got %s)", quote(r.Proto))
	case !headerHasToken(r.Header, "Connection", "upgrade") || !headerHasToken(r.Header, "Upgrade", "websocket"):
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Connection", "Upgrade")
		return bad(http.StatusUpgradeRequired, CodeUpgradeRequired,
			"not a WebSocket handshake (want Connection: Upgrade and Upgrade: websocket; got Connection %s, Upgrade %s)",
			quote(strings.Join(r.Header.Values("Connection"), ", ")), quote(strings.Join(r.Header.Values("Upgrade"), ", ")))
	}
	if v := r.Header.Values("Sec-WebSocket-Version"); len(v) != 1 || v[0] != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		return bad(http.StatusBadRequest, CodeUnsupportedVersion,
			"unsupported Sec-WebSocket-Version %s (only 13 is supported)", quote(strings.Join(v, ", ")))
	}
	switch keys := r.Header.Values("Sec-WebSocket-Key"); {
	case len(keys) == 0:
		return bad(http.StatusBadRequest, CodeInvalidHandshake, "missing Sec-WebSocket-Key header")
	case len(keys) > 1:
		return bad(http.StatusBadRequest, CodeInvalidHandshake, "header Sec-WebSocket-Key sent %d times (want once)", len(keys))
	default:
		k := strings.TrimSpace(keys[0])
		if b, err := base64.StdEncoding.DecodeString(k); err != nil || len(b) != 16 {
			return bad(http.StatusBadRequest, CodeInvalidHandshake, "invalid Sec-WebSocket-Key %s (want 16 bytes in base64)", quote(k))
		}
	}
	origins := r.Header.Values("Origin")
	if len(origins) > 1 {
		return bad(http.StatusBadRequest, CodeInvalidHandshake, "header Origin sent %d times (want at most once)", len(origins))
	}
	if len(origins) == 0 || origins[0] == "" || ao != nil && ao.InsecureSkipVerify {
		return nil
	}
	origin := origins[0]
	u, err := url.Parse(origin)
	if err != nil {
		return bad(http.StatusForbidden, CodeForbiddenOrigin, "Origin %s is not a URL", quote(origin))
	}
	if strings.EqualFold(r.Host, u.Host) {
		return nil
	}
	if ao != nil {
		for _, p := range ao.OriginPatterns {
			target := u.Host
			if strings.Contains(p, "://") {
				target = u.Scheme + "://" + u.Host
			}
			// Patterns were checked by NewHandler: no error here.
			if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(target)); ok {
				return nil
			}
		}
	}
	if u.Host == "" {
		return bad(http.StatusForbidden, CodeForbiddenOrigin, "Origin %s is not a URL with a host", quote(origin))
	}
	return bad(http.StatusForbidden, CodeForbiddenOrigin,
		"Origin %s may not connect to host %s (same origin only, unless HandlerOptions.Accept.OriginPatterns allows it)",
		quote(origin), quote(r.Host))
}

// checkOriginPatterns reports the first malformed pattern of
// AcceptOptions.OriginPatterns, which coder/websocket would only find (and
// log, refusing every cross-origin request) at request time.
func checkOriginPatterns(ao *websocket.AcceptOptions) error {
	if ao == nil {
		return nil
	}
	for _, p := range ao.OriginPatterns {
		if _, err := path.Match(strings.ToLower(p), ""); err != nil {
			return fmt.Errorf("ws: NewHandler: invalid Accept.OriginPatterns entry %s: %w", quote(p), err)
		}
	}
	return nil
}

// quote quotes s for an answer, cut to 64 bytes at a rune boundary.
func quote(s string) string { return textutil.Quote(s, 64) }

func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
