package resume

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/jsonmember"
	"github.com/replaybus/replaybus/scope"
)

// Many sessions on one connection (docs/protocol.md): the request's set,
// the connection cursor, and the frames that name a session of the set.

// The synthetic frame types of a many-sessions stream; the bus refuses them
// as published types (frame.Reserved).
const (
	TypeConnection     = "connection"      // first frame: {connection, sessions, maxSessions, epoch, cursor?}
	TypeSessionAdded   = "session_added"   // {session, scope}
	TypeSessionRemoved = "session_removed" // {session}
	TypeSessionError   = "session_error"   // {session, code, message}: the session is not in the set
)

// DefaultMaxSessions is the default cap of a many-sessions set; MaxMaxSessions
// the largest a handler accepts.
const DefaultMaxSessions, MaxMaxSessions = 100, 1000

// maxCursorEntries bounds the entries of a connection cursor: what a
// connection of MaxMaxSessions sessions can write (a "+" and an "@" per
// session, a "-" per URL session removed), so every cursor a server writes
// is taken back.
const maxCursorEntries = 3 * MaxMaxSessions

// SessionScope is one session of a many-sessions set with its scope; its
// JSON form is {"session":"a","scope":"descendants"}.
type SessionScope struct {
	Session string     `json:"session"`
	Scope   scope.Kind `json:"scope"`
}

// ParseSessionScope reads one session= value: "<id>" (scope def) or
// "<id>:<scope>", the scope read after the last ':' when it is session,
// descendants or subtree. A bad id is a 400 invalid_session_id, scope all a
// 400 invalid_scope, each naming the value.
func ParseSessionScope(v string, def scope.Kind) (SessionScope, error) {
	ss := SessionScope{Session: v, Scope: def}
	if i := strings.LastIndexByte(v, ':'); i >= 0 {
		switch v[i+1:] {
		case "session", "descendants", "subtree":
			ss.Session = v[:i]
			ss.Scope, _ = scope.Parse(v[i+1:])
		case "all":
			return ss, badRequest(CodeInvalidScope, "invalid scope of session %s: all (want session, descendants or subtree: a set of sessions is not the whole bus)", quote(v))
		}
	}
	if err := checkSessionID(ss.Session); err != nil {
		return ss, err
	}
	return ss, nil
}

func checkSessionID(id string) error {
	if id == "" {
		return badRequest(CodeInvalidSessionID, "empty session id")
	}
	if err := frame.CheckName("session id", id); err != nil {
		return badRequest(CodeInvalidSessionID, "invalid argument: %v", err)
	}
	return nil
}

func badRequest(code, format string, args ...any) *StatusError {
	return &StatusError{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

// ConnCursor is the cursor of a many-sessions connection: Main (the epoch
// and the main position), the sessions Added on the connection (not in its
// URL) and the URL sessions Removed, and Floors, the sessions whose
// position differs from Main.ID. [ParseConnCursor] reads it and
// [ConnCursor.String] writes it (docs/protocol.md, "The connection cursor").
// Not safe for concurrent use.
type ConnCursor struct {
	Main    eventbus.Position
	Added   map[string]scope.Kind
	Removed map[string]bool
	Floors  map[string]uint64
}

// ParseConnCursor parses a connection cursor: a cursor as [ParseCursor]
// takes it, followed by ";"-separated entries "+<sid>:<scope>", "-<sid>"
// and "@<sid>=<seq>", sid percent-encoded. "" is no cursor (nil, nil).
// Anything else, more than 3,000 entries (3 × MaxMaxSessions), or one session twice in one kind
// of entry, is a [*CursorError] naming the value.
func ParseConnCursor(s string) (*ConnCursor, error) {
	if s == "" {
		return nil, nil
	}
	head, rest, _ := strings.Cut(s, ";")
	p, err := ParseCursor(head)
	if err != nil {
		if ce, ok := err.(*CursorError); ok {
			ce.Value = s
		}
		return nil, err
	}
	c := &ConnCursor{Main: *p}
	if rest == "" {
		if strings.HasSuffix(s, ";") {
			return nil, &CursorError{Value: s, Reason: "empty entry at the end"}
		}
		return c, nil
	}
	entries := strings.Split(rest, ";")
	if len(entries) > maxCursorEntries {
		return nil, &CursorError{Value: s, Reason: fmt.Sprintf("%d entries (at most %d)", len(entries), maxCursorEntries)}
	}
	for _, e := range entries {
		bad := func(why string) error {
			return &CursorError{Value: s, Reason: fmt.Sprintf("entry %s: %s", quote(e), why)}
		}
		if len(e) < 2 {
			return nil, bad("want +<session>:<scope>, -<session> or @<session>=<seq>")
		}
		body := e[1:]
		switch e[0] {
		case '+':
			sid, sc, ok := strings.Cut(body, ":")
			if !ok {
				return nil, bad("want +<session>:<scope>")
			}
			id, err := unescapeSID(sid)
			if err != nil {
				return nil, bad(err.Error())
			}
			k, err := scope.Parse(sc)
			if err != nil || k == scope.All {
				return nil, bad("scope " + quote(sc) + " (want session, descendants or subtree)")
			}
			if c.Added == nil {
				c.Added = map[string]scope.Kind{}
			}
			if _, dup := c.Added[id]; dup {
				return nil, bad("session added twice")
			}
			c.Added[id] = k
		case '-':
			id, err := unescapeSID(body)
			if err != nil {
				return nil, bad(err.Error())
			}
			if c.Removed == nil {
				c.Removed = map[string]bool{}
			}
			if c.Removed[id] {
				return nil, bad("session removed twice")
			}
			c.Removed[id] = true
		case '@':
			sid, num, ok := strings.Cut(body, "=")
			if !ok {
				return nil, bad("want @<session>=<seq>")
			}
			id, err := unescapeSID(sid)
			if err != nil {
				return nil, bad(err.Error())
			}
			n, reason := parseSeq(num, 0)
			if reason != "" {
				return nil, bad(reason)
			}
			if c.Floors == nil {
				c.Floors = map[string]uint64{}
			}
			if _, dup := c.Floors[id]; dup {
				return nil, bad("two positions for one session")
			}
			c.Floors[id] = n
		default:
			return nil, bad("want +<session>:<scope>, -<session> or @<session>=<seq>")
		}
	}
	return c, nil
}

// unescapeSID decodes a percent-encoded session id of a cursor entry.
func unescapeSID(s string) (string, error) {
	for i := 0; i < len(s); i++ {
		if !sidByte(s[i]) && s[i] != '%' {
			return "", fmt.Errorf("byte %s not percent-encoded", runeAt(s, i))
		}
	}
	id, err := url.PathUnescape(s)
	if err != nil {
		return "", fmt.Errorf("bad percent-encoding")
	}
	if err := checkSessionID(id); err != nil {
		return "", fmt.Errorf("%s", err.(*StatusError).Message)
	}
	return id, nil
}

func sidByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '~' || c == '-'
}

func appendSID(dst []byte, id string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(id); i++ {
		c := id[i]
		if sidByte(c) {
			dst = append(dst, c)
		} else {
			dst = append(dst, '%', hex[c>>4], hex[c&15])
		}
	}
	return dst
}

// String writes c as a server writes it: the main id ("<epoch>-<seq>" when
// idEpoch is set, as [FormatID]), then the entries, + then - then @, each
// sorted by session id.
func (c *ConnCursor) String(idEpoch string) string {
	b := AppendID(nil, c.Main.ID, idEpoch)
	for _, id := range slices.Sorted(maps.Keys(c.Added)) {
		b = append(b, ";+"...)
		b = appendSID(b, id)
		b = append(b, ':')
		b = append(b, c.Added[id].String()...)
	}
	for _, id := range slices.Sorted(maps.Keys(c.Removed)) {
		b = append(b, ";-"...)
		b = appendSID(b, id)
	}
	for _, id := range slices.Sorted(maps.Keys(c.Floors)) {
		b = append(b, ";@"...)
		b = appendSID(b, id)
		b = append(b, '=')
		b = strconv.AppendUint(b, c.Floors[id], 10)
	}
	return string(b)
}

// Advance records that the event with id x was sent: every position below
// x rises to x, and a floor equal to the main position is dropped.
func (c *ConnCursor) Advance(x uint64) {
	c.Main.ID = max(c.Main.ID, x)
	for id, f := range c.Floors {
		if f < x {
			f = x
		}
		if f == c.Main.ID {
			delete(c.Floors, id)
		} else {
			c.Floors[id] = f
		}
	}
}

// Set returns the set the cursor describes over the URL's sessions: url
// less Removed, plus Added (in url's order, then the added ones sorted).
func (c *ConnCursor) Set(urlSet []SessionScope) []SessionScope {
	out := make([]SessionScope, 0, len(urlSet)+len(c.Added))
	seen := map[string]bool{}
	for _, s := range urlSet {
		if !c.Removed[s.Session] {
			out = append(out, s)
			seen[s.Session] = true
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.Added)) {
		if !seen[id] {
			out = append(out, SessionScope{Session: id, Scope: c.Added[id]})
		}
	}
	return out
}

// ManyRequest is a validated many-sessions subscribe request.
type ManyRequest struct {
	Sessions []SessionScope            // the URL's set, in URL order
	Options  eventbus.SubscribeOptions // what applies to the whole connection (no Cursor)
	Cursor   *ConnCursor               // nil: none; Main.Epoch is the bus's form of the client's epoch
	Message  bool                      // ?events=message
}

// ParseManyRequest validates a many-sessions request (GET {events}?session=…):
// the session= values (1–max; 400 too_many_sessions beyond, naming both),
// every parameter [ParseRequest] reads (scope is the default of entries
// without one; all is refused; presence=1, snapshot=1 and client= are
// refused) and the connection cursor from Last-Event-ID, last_event_id or
// lastEventId with ParseRequest's precedence. Errors are 400
// [*StatusError] values naming the value. Reads only r's URL and headers.
func ParseManyRequest(r *http.Request, ownEpoch string, rules QueryRules, maxSessions int) (ManyRequest, error) {
	var m ManyRequest
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return m, badRequest(CodeInvalidQuery, "invalid query %s: %v", quote(r.URL.RawQuery), err)
	}
	// ParseRequest reads everything but the set and the cursor: it gets a
	// copy without the cursor, and session= among the allowed names.
	r2 := r.Clone(r.Context())
	q2 := maps.Clone(q)
	delete(q2, "lastEventId")
	delete(q2, "last_event_id")
	r2.URL.RawQuery = q2.Encode()
	r2.Header.Del("Last-Event-ID")
	rules.Allow = append(slices.Clip(rules.Allow), "session")
	o, err := ParseRequest(r2, "many", ownEpoch, rules)
	if err != nil {
		return m, err
	}
	if m.Message, err = ParseEvents(q.Get("events")); err != nil {
		return m, err
	}
	switch {
	case o.Scope == scope.All:
		return m, badRequest(CodeInvalidScope, "invalid scope \"all\" with many sessions (want session, descendants or subtree)")
	case o.Presence:
		return m, badRequest(CodeInvalidPresence, "presence=1 is not supported with many sessions (use a session's own stream)")
	case o.Snapshot:
		return m, badRequest(CodeInvalidSnapshot, "snapshot=1 is not supported with many sessions")
	case q.Has("client"):
		return m, badRequest(CodeInvalidClient, "client= is not supported with many sessions")
	}
	vals := q["session"]
	if len(vals) == 0 {
		return m, badRequest(CodeInvalidSessionID, `no session= parameter: name the sessions `+
			`(?session=a&session=b:descendants), or, to serve one session, mount the handler on a `+
			`pattern with {id}, such as "GET /session/{id}/events", or set HandlerOptions.SessionID`)
	}
	if len(vals) > maxSessions {
		return m, &StatusError{Status: http.StatusBadRequest, Code: CodeTooManySessions,
			Message: fmt.Sprintf("%d sessions, over the cap of %d per connection", len(vals), maxSessions)}
	}
	seen := make(map[string]bool, len(vals))
	for _, v := range vals {
		ss, err := ParseSessionScope(v, o.Scope)
		if err != nil {
			return m, err
		}
		if seen[ss.Session] {
			return m, badRequest(CodeInvalidSessionID, "session %s is in the set twice", quote(ss.Session))
		}
		seen[ss.Session] = true
		m.Sessions = append(m.Sessions, ss)
	}
	epoch := r.Header.Get(HeaderEpoch) // validated by ParseRequest
	for _, v := range [...]string{q.Get("lastEventId"), q.Get("last_event_id"), r.Header.Get("Last-Event-ID")} {
		c, err := ParseConnCursor(v)
		if err != nil {
			return m, badRequest(CodeInvalidLastEventID, "%s", err.(*CursorError).message())
		}
		if c != nil {
			m.Cursor = c
		}
	}
	if m.Cursor != nil {
		if m.Cursor.Main.Epoch == "" {
			m.Cursor.Main.Epoch = epoch
		}
		m.Cursor.Main.Epoch = busEpoch(m.Cursor.Main.Epoch, ownEpoch)
		o.NoReplay = false
	}
	o.Cursor = nil
	m.Options = o
	return m, nil
}

// ParseManyAdd validates one session to add: its id, its scope name (""
// is session; all is refused) and from, a cursor of that session ("" none).
// Errors are 400 [*StatusError] values (invalid_session_id, invalid_scope,
// invalid_last_event_id) naming the value.
func ParseManyAdd(session, scopeName, from string) (ManyAdd, error) {
	a := ManyAdd{SessionScope: SessionScope{Session: session}}
	if err := checkSessionID(session); err != nil {
		return a, err
	}
	if scopeName != "" {
		k, err := scope.Parse(scopeName)
		if err != nil || k == scope.All {
			return a, badRequest(CodeInvalidScope, "invalid scope %s of session %s (want session, descendants or subtree)", quote(scopeName), quote(session))
		}
		a.Scope = k
	}
	p, err := ParseCursor(from)
	if err != nil {
		return a, badRequest(CodeInvalidLastEventID, "invalid from of session %s: %s", quote(session), err.(*CursorError).message())
	}
	a.From = p
	return a, nil
}

// ParseManyChange reads the body of POST {events}/{conn}:
// {"add":[{"session":"c","scope":"descendants","from":"<cursor>"}],"remove":["a"]}
// (both optional, names exact, nothing else). Errors are 400
// [*StatusError] values: invalid_json saying what is wrong, or
// ParseManyAdd's.
func ParseManyChange(body []byte) (ManyChange, error) {
	var in struct {
		Add []struct {
			Session string `json:"session"`
			Scope   string `json:"scope"`
			From    string `json:"from"`
		} `json:"add"`
		Remove []string `json:"remove"`
	}
	var c ManyChange
	if err := exactMembers(body, []string{"add", "remove"}, "add", []string{"session", "scope", "from"}); err != nil {
		return c, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return c, badRequest(CodeInvalidJSON, "invalid body: %v (want {\"add\":[{\"session\",\"scope\",\"from\"}],\"remove\":[…]})", err)
	}
	if dec.More() {
		return c, badRequest(CodeInvalidJSON, "invalid body: data after the object")
	}
	for _, x := range in.Add {
		a, err := ParseManyAdd(x.Session, x.Scope, x.From)
		if err != nil {
			return c, err
		}
		c.Add = append(c.Add, a)
	}
	for _, id := range in.Remove {
		if err := checkSessionID(id); err != nil {
			return c, err
		}
		c.Remove = append(c.Remove, id)
	}
	return c, nil
}

// exactMembers refuses what encoding/json would take silently in body's
// object: a member given twice (the last won) or named in another case
// than one of names ({"ADD":…} was an add) — at the top and in each
// object of the array member list (with its names inner). A body that is
// not JSON passes: the decode that follows names its error.
func exactMembers(body []byte, names []string, list string, inner []string) error {
	if !json.Valid(body) {
		return nil
	}
	f, ok := jsonmember.Find(body, []jsonmember.Object{{Names: names}, {Path: list + "[]", Names: inner}})
	switch {
	case !ok:
		return nil
	case f.Lone:
		return badRequest(CodeInvalidJSON, "invalid body at byte %d: member %s (names are case-sensitive: want %q)", f.At, quote(f.Name), f.First)
	case f.Name != f.First:
		return badRequest(CodeInvalidJSON, "invalid body at byte %d: member %s given twice (as %q: names are matched regardless of case)", f.At, quote(f.Name), f.First)
	}
	return badRequest(CodeInvalidJSON, "invalid body at byte %d: member %s given twice", f.At, quote(f.Name))
}
