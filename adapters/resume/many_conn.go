package resume

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// Many is one many-sessions connection's subscription, shared by the SSE
// and WebSocket handlers: the set, the connection cursor, and a bus
// subscription of the set that it makes again at every change (an add, a
// remove), from the cursor, so that a change and a reconnect are the same
// exact resume. [Many.Next] is called by the one goroutine that writes the
// stream; [Many.Change] from any goroutine. After [Many.Close] a Change
// answers 404 connection_not_found.
type Many struct {
	bus     *eventbus.Bus
	ctx     context.Context
	id      string
	url     []SessionScope
	set     []SessionScope
	cur     ConnCursor
	idEpoch string
	base    eventbus.SubscribeOptions
	max     int
	sub     *eventbus.Subscription
	out     []eventbus.Event // synthetic frames handed out before the subscription's

	mu      sync.Mutex
	pending []*manyChange
	kick    context.CancelFunc
	closed  bool
}

// ManyAdd is one session to add: Session, Scope, and From, the client's
// position in that session (nil: what the replay buffer holds).
type ManyAdd struct {
	SessionScope
	From *eventbus.Position
}

// ManyChange is one change of a connection's set: Remove first, then Add.
// Authorize, when set, is asked about each session it adds (an error
// refuses the change: 403, or the [*StatusError] it is or wraps). With
// ErrorFrames a refused add is a session_error frame on the stream (the
// WebSocket subscribe message) rather than an error returned.
type ManyChange struct {
	Add         []ManyAdd
	Remove      []string
	Authorize   func(SessionScope) error
	ErrorFrames bool
}

// ManyResult is a change's answer, in the JSON of POST {events}/{conn}.
type ManyResult struct {
	Connection string         `json:"connection"`
	Sessions   []SessionScope `json:"sessions"`
	Cursor     string         `json:"cursor"`
}

type manyChange struct {
	c    ManyChange
	done chan struct{}
	res  ManyResult
	err  error
}

// OpenMany subscribes the set of req on bus for a connection living as
// long as ctx: the URL's sessions with the cursor's entries, each session
// that does not exist (or was closed) left out with a session_error frame.
// maxSessions caps the set; idEpoch is the epoch ids are written with (""
// for plain ids). Errors: 400 too_many_sessions when the cursor's set is
// over the cap, the bus's errors otherwise.
func OpenMany(ctx context.Context, bus *eventbus.Bus, req ManyRequest, maxSessions int, idEpoch string) (*Many, error) {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	m := &Many{bus: bus, ctx: ctx, id: base64.RawURLEncoding.EncodeToString(raw[:]), url: req.Sessions,
		idEpoch: idEpoch, base: req.Options, max: maxSessions}
	live := false
	if req.Cursor != nil {
		m.cur = *req.Cursor
	} else {
		m.cur.Main.Epoch = bus.Epoch()
		if req.Options.NoReplay {
			m.cur.Main.ID, live = bus.LastEventID(), true
		}
	}
	m.cur.Added, m.cur.Removed, m.cur.Floors = maps.Clone(m.cur.Added), maps.Clone(m.cur.Removed), maps.Clone(m.cur.Floors)
	m.set = m.cur.Set(req.Sessions)
	if len(m.set) > maxSessions {
		return nil, &StatusError{Status: http.StatusBadRequest, Code: CodeTooManySessions,
			Message: fmt.Sprintf("%d sessions (the URL's and the cursor's), over the cap of %d per connection", len(m.set), maxSessions)}
	}
	for id := range m.cur.Floors {
		if !m.has(id) {
			delete(m.cur.Floors, id)
		}
	}
	errs := m.dropGone()
	conn := struct {
		Connection  string         `json:"connection"`
		Sessions    []SessionScope `json:"sessions"`
		MaxSessions int            `json:"maxSessions"`
		Epoch       string         `json:"epoch"`
		Cursor      string         `json:"cursor,omitempty"`
	}{m.id, m.sessions(), maxSessions, bus.Epoch(), ""}
	if live {
		conn.Cursor = m.cur.String(idEpoch)
	}
	m.out = append(m.out, synthetic("", TypeConnection, conn))
	m.out = append(m.out, errs...)
	if err := m.subscribe(req.Cursor != nil || live); err != nil {
		return nil, err
	}
	return m, nil
}

// ID returns the connection id, the {conn} of POST {events}/{conn}.
func (m *Many) ID() string { return m.id }

// Subscription returns the current bus subscription, nil while the set is
// empty; it changes at every change of the set.
func (m *Many) Subscription() *eventbus.Subscription { return m.sub }

func (m *Many) has(id string) bool {
	return slices.ContainsFunc(m.set, func(s SessionScope) bool { return s.Session == id })
}

func (m *Many) sessions() []SessionScope { return slices.Clone(m.set) }

func synthetic(session, typ string, data any) eventbus.Event {
	raw, _ := json.Marshal(data)
	return eventbus.Event{Type: typ, Session: session, Data: raw}
}

func sessionError(session string, se *StatusError) eventbus.Event {
	return synthetic(session, TypeSessionError, struct {
		Session string `json:"session"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}{session, se.Code, se.Message})
}

// goneError is the answer for a session of the set that does not exist,
// or nil when it does.
func (m *Many) goneError(id string) *StatusError {
	if m.bus.SessionExists(id) {
		return nil
	}
	if m.bus.SessionClosed(id) {
		return &StatusError{Status: http.StatusGone, Code: CodeSessionClosed, Message: fmt.Sprintf("session %s was closed", quote(id))}
	}
	return &StatusError{Status: http.StatusNotFound, Code: CodeSessionNotFound, Message: fmt.Sprintf("session %s not found", quote(id))}
}

// dropGone leaves out of the set every session that does not exist, and
// returns their session_error frames.
func (m *Many) dropGone() []eventbus.Event {
	var out []eventbus.Event
	m.set = slices.DeleteFunc(m.set, func(s SessionScope) bool {
		se := m.goneError(s.Session)
		if se == nil {
			return false
		}
		out = append(out, sessionError(s.Session, se))
		delete(m.cur.Added, s.Session)
		delete(m.cur.Floors, s.Session)
		return true
	})
	return out
}

// subscribe (re)subscribes the set from the cursor (withCursor: else the
// whole replay buffers, a first connect without cursor).
func (m *Many) subscribe(withCursor bool) error {
	if m.sub != nil {
		m.sub.Close()
		m.sub = nil
	}
	for len(m.set) > 0 {
		o := m.base
		o.Scope = m.set[0].Scope
		o.Sessions = make(map[string]scope.Kind, len(m.set)-1)
		for _, s := range m.set[1:] {
			o.Sessions[s.Session] = s.Scope
		}
		o.RequireSession = true
		if withCursor {
			c := m.cur.Main
			o.Cursor, o.Floors, o.NoReplay = &c, maps.Clone(m.cur.Floors), false
			if len(o.Floors) == 0 {
				o.Floors = nil
			}
		}
		if o.Floors == nil && len(o.Sessions) == 0 {
			o.Floors = map[string]uint64{} // a set of one: still a many-sessions subscription
		}
		sub, err := m.bus.Subscribe(m.ctx, m.set[0].Session, o)
		if errors.Is(err, eventbus.ErrSessionNotFound) || errors.Is(err, eventbus.ErrSessionClosed) {
			if gone := m.dropGone(); len(gone) > 0 {
				m.out = append(m.out, gone...)
				continue
			}
		}
		if err != nil {
			return err
		}
		m.sub = sub
		if o.Cursor == nil || o.Cursor.Epoch == "" || o.Cursor.Epoch == m.bus.Epoch() {
			m.cur.Main.Epoch = m.bus.Epoch()
		}
		return nil
	}
	return nil
}

// Next returns the next frame of the connection, and for an event, and
// for the connection, session_added and session_removed frames, the
// connection cursor after it (what its id: line carries; "" for others), blocking until
// one is ready, a change was applied (its frames come first), deadline
// passes (eventbus.ErrTimeout; zero: none) or the connection's context
// ends. The subscription's end (evicted, bus closed) is its error.
func (m *Many) Next(deadline time.Time) (eventbus.Event, string, error) {
	for {
		if len(m.out) > 0 {
			ev := m.out[0]
			m.out = m.out[1:]
			switch ev.Type {
			case TypeConnection, TypeSessionAdded, TypeSessionRemoved:
				// The set changed (or was resolved): the client's cursor
				// must say so before any event does, or a cut right
				// after would resume the old set.
				return ev, m.cur.String(m.idEpoch), nil
			}
			return ev, "", nil
		}
		m.mu.Lock()
		todo := m.pending
		m.pending = nil
		m.mu.Unlock()
		if len(todo) > 0 {
			for _, c := range todo {
				c.res, c.err = m.apply(c.c)
				close(c.done)
			}
			continue
		}
		var wctx context.Context
		var cancel context.CancelFunc
		if deadline.IsZero() {
			wctx, cancel = context.WithCancel(m.ctx)
		} else {
			wctx, cancel = context.WithDeadline(m.ctx, deadline)
		}
		m.mu.Lock()
		if len(m.pending) > 0 {
			m.mu.Unlock()
			cancel()
			continue
		}
		m.kick = cancel
		m.mu.Unlock()
		var ev eventbus.Event
		var err error
		if m.sub == nil {
			<-wctx.Done()
			err = wctx.Err()
		} else {
			ev, err = m.sub.Next(wctx)
		}
		m.mu.Lock()
		m.kick = nil
		m.mu.Unlock()
		cancel()
		if err != nil {
			if m.ctx.Err() != nil {
				return ev, "", m.ctx.Err()
			}
			if wctx.Err() != nil {
				if !deadline.IsZero() && !time.Now().Before(deadline) {
					return ev, "", eventbus.ErrTimeout
				}
				continue // kicked: a change is pending
			}
			return ev, "", err
		}
		if ev.ID != 0 {
			m.cur.Advance(ev.ID)
			return ev, m.cur.String(m.idEpoch), nil
		}
		switch ev.Type {
		case frame.TypeSlowClientWarning, frame.TypeClientEvicted:
			ev.Session = "" // the connection's, not a session's
		case frame.TypeStateResyncRequired:
			var d frame.ResyncData
			if json.Unmarshal(ev.Data, &d) == nil {
				switch d.Reason {
				case frame.ReasonEpochReset:
					// The bus replays this history from its start.
					m.cur.Main = eventbus.Position{Epoch: m.bus.Epoch()}
					m.cur.Floors = nil
				case frame.ReasonEventsDropped, frame.ReasonReplayBudgetExceeded:
					ev.Session = "" // may span sessions: a gap in every one
				}
			}
		}
		return ev, "", nil
	}
}

// Cursor returns the connection cursor as the stream would write it now.
// Only on Next's goroutine.
func (m *Many) Cursor() string { return m.cur.String(m.idEpoch) }

// Change applies c between two frames of the stream, waiting until it is
// applied or ctx ends, and returns the new set. Errors: 404
// connection_not_found once the connection has ended; the answers of
// [ManyChange] (400 too_many_sessions, 404 session_not_found, 410
// session_closed, 403) with nothing changed. Safe from any goroutine.
func (m *Many) Change(ctx context.Context, c ManyChange) (ManyResult, error) {
	req := &manyChange{c: c, done: make(chan struct{})}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ManyResult{}, m.notFound()
	}
	m.pending = append(m.pending, req)
	if m.kick != nil {
		m.kick()
	}
	m.mu.Unlock()
	select {
	case <-req.done:
		return req.res, req.err
	case <-ctx.Done():
		return ManyResult{}, ctx.Err()
	case <-m.ctx.Done():
		return ManyResult{}, m.notFound()
	}
}

func (m *Many) notFound() error {
	return &StatusError{Status: http.StatusNotFound, Code: CodeConnectionNotFound, Message: fmt.Sprintf("connection %s not found on this server", quote(m.id))}
}

// Close ends the connection's subscription; pending and later changes
// answer connection_not_found. Only on Next's goroutine.
func (m *Many) Close() {
	m.mu.Lock()
	m.closed = true
	todo := m.pending
	m.pending = nil
	m.mu.Unlock()
	for _, c := range todo {
		c.err = m.notFound()
		close(c.done)
	}
	if m.sub != nil {
		m.sub.Close()
	}
}

// apply is a change on Next's goroutine: every check, then the frames, the
// cursor, the set and the subscription.
func (m *Many) apply(c ManyChange) (ManyResult, error) {
	set := slices.Clone(m.set)
	var removed []string
	for _, id := range c.Remove {
		if i := slices.IndexFunc(set, func(s SessionScope) bool { return s.Session == id }); i >= 0 {
			set = slices.Delete(set, i, i+1)
			removed = append(removed, id)
		}
	}
	var added []ManyAdd
	refuse := func(a ManyAdd, se *StatusError) (ManyResult, error) {
		if c.ErrorFrames {
			m.out = append(m.out, sessionError(a.Session, se))
			return m.result(), nil
		}
		return ManyResult{}, se
	}
	for _, a := range c.Add {
		if slices.ContainsFunc(set, func(s SessionScope) bool { return s.Session == a.Session }) {
			continue
		}
		if len(set) >= m.max {
			return refuse(a, &StatusError{Status: http.StatusBadRequest, Code: CodeTooManySessions,
				Message: fmt.Sprintf("adding session %s makes %d sessions, over the cap of %d per connection", quote(a.Session), len(set)+1, m.max)})
		}
		if se := m.goneError(a.Session); se != nil {
			return refuse(a, se)
		}
		if c.Authorize != nil {
			if err := c.Authorize(a.SessionScope); err != nil {
				var se *StatusError
				if !errors.As(err, &se) {
					se = &StatusError{Status: http.StatusForbidden, Code: CodeForbidden, Message: err.Error()}
				}
				return refuse(a, se)
			}
		}
		set = append(set, a.SessionScope)
		added = append(added, a)
	}
	if len(removed) == 0 && len(added) == 0 {
		return m.result(), nil
	}
	inURL := func(id string) bool {
		return slices.ContainsFunc(m.url, func(s SessionScope) bool { return s.Session == id })
	}
	for _, id := range removed {
		m.out = append(m.out, synthetic(id, TypeSessionRemoved, struct {
			Session string `json:"session"`
		}{id}))
		delete(m.cur.Added, id)
		delete(m.cur.Floors, id)
		if inURL(id) {
			if m.cur.Removed == nil {
				m.cur.Removed = map[string]bool{}
			}
			m.cur.Removed[id] = true
		}
	}
	for _, a := range added {
		m.out = append(m.out, synthetic(a.Session, TypeSessionAdded, a.SessionScope))
		if inURL(a.Session) && m.cur.Removed[a.Session] && urlScope(m.url, a.Session) == a.Scope {
			delete(m.cur.Removed, a.Session)
		} else {
			if m.cur.Added == nil {
				m.cur.Added = map[string]scope.Kind{}
			}
			m.cur.Added[a.Session] = a.Scope
		}
		floor := uint64(0)
		if f := a.From; f != nil {
			ep := BusEpoch(f.Epoch, m.bus.Epoch())
			if (ep != "" && ep != m.bus.Epoch()) || f.ID > m.bus.LastEventID() {
				m.out = append(m.out, synthetic(a.Session, frame.TypeStateResyncRequired, frame.ResyncData{
					Reason: frame.ReasonEpochReset, LastDeliveredID: f.ID, Epoch: m.bus.Epoch()}))
			} else {
				floor = f.ID
			}
		}
		if floor != m.cur.Main.ID {
			if m.cur.Floors == nil {
				m.cur.Floors = map[string]uint64{}
			}
			m.cur.Floors[a.Session] = floor
		}
	}
	m.set = set
	if err := m.subscribe(true); err != nil {
		return ManyResult{}, err
	}
	return m.result(), nil
}

func urlScope(url []SessionScope, id string) scope.Kind {
	for _, s := range url {
		if s.Session == id {
			return s.Scope
		}
	}
	return scope.Session
}

func (m *Many) result() ManyResult {
	return ManyResult{Connection: m.id, Sessions: m.sessions(), Cursor: m.cur.String(m.idEpoch)}
}
