package resume

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
)

// Coalescing query parameters: ?coalesce= names a rule set of the coalesce
// package, ?throttle= a hold window.
const (
	// CodeInvalidCoalesce answers 400 for a coalesce value other than acp,
	// agentpool or off.
	CodeInvalidCoalesce = "invalid_coalesce"
	// CodeInvalidThrottle answers 400 for a throttle that is not a Go
	// duration from 0 to MaxThrottle, or that is set without coalesce.
	CodeInvalidThrottle = "invalid_throttle"
	// MaxThrottle bounds ?throttle=.
	MaxThrottle = 5 * time.Second
)

// parseCoalescing reads ?coalesce= (acp, agentpool, off; absent = off) and
// ?throttle= (e.g. 150ms; 0–5s; only with a rule set) into o.
func parseCoalescing(q url.Values, o *eventbus.SubscribeOptions) error {
	bad := func(code, format string, args ...any) error {
		return &StatusError{Status: 400, Code: code, Message: fmt.Sprintf(format, args...)}
	}
	name := q.Get("coalesce")
	switch name {
	case "", "off":
	default:
		set, ok := coalesce.Lookup(name)
		if !ok {
			return bad(CodeInvalidCoalesce, "invalid coalesce %s (want %s or off)", quote(name), strings.Join(coalesce.Names(), ", "))
		}
		o.Coalesce = set
	}
	if s := q.Get("throttle"); s != "" {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			return bad(CodeInvalidThrottle, "invalid throttle %s: not a duration (want e.g. 150ms, 0–%v)", quote(s), MaxThrottle)
		case d < 0 || d > MaxThrottle:
			return bad(CodeInvalidThrottle, "invalid throttle %s: out of range (want 0–%v)", quote(s), MaxThrottle)
		case d > 0 && o.Coalesce == nil:
			return bad(CodeInvalidThrottle, "throttle %s needs coalesce=%s", quote(s), strings.Join(coalesce.Names(), " or "))
		}
		o.Throttle = d
	}
	return nil
}
