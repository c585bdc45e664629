package resume

import (
	"net/http"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// The hooks the SSE and WebSocket handlers share: the types of their
// HandlerOptions' SessionID, Authorize, Configure and OnSubscribe fields,
// which both call at the same points of a subscribe request, in this order
// (see ParseRequest for what is validated before Authorize). A function
// literal of the same signature assigns to each.

// SessionIDFunc extracts the session id from a subscribe request. A
// handler's nil means r.PathValue("id"), which works when the handler is
// mounted on a ServeMux pattern with an {id} wildcard (sse.Pattern,
// ws.Pattern); set one to mount under any other router (chi.URLParam, a
// path prefix, …).
type SessionIDFunc func(r *http.Request) string

// AuthorizeFunc, when set, is called after the request has been validated
// and before anything is subscribed (for WebSocket: before the upgrade),
// with the session id and the requested scope. A non-nil error answers 403
// forbidden with the error's text as message, or, when the error is (or
// wraps) a [*StatusError], that status, code and message. It runs on the
// request's goroutine and may block (it holds no lock).
type AuthorizeFunc func(r *http.Request, sessionID string, sc scope.Kind) error

// ConfigureFunc, when set, may adjust the subscribe options derived from
// the request (overflow policy, byte limit, slow-client warnings, Name)
// just before [eventbus.Bus.Subscribe]. The bus validates the result: an
// eventbus.ErrInvalid answers 400 invalid_argument.
type ConfigureFunc func(r *http.Request, o *eventbus.SubscribeOptions)

// OnSubscribeFunc, when set, is called with each stream's subscription
// once it is made (for WebSocket: once the resume is settled) and before
// its first frame is written, on the request's goroutine: the application
// learns the connection's subscription, for [eventbus.Bus.SendTo] (a
// targeted frame sent here arrives after the replay and replay_complete).
// The subscription ends when the stream does; the hook must not keep it
// past that (watch sub.Done()). It may block the stream's start, not the
// bus.
type OnSubscribeFunc func(r *http.Request, sub *eventbus.Subscription)

// AuthorizeCancelFunc, when set, decides whether a cancel may be applied:
// called with the request (POST /session/{id}/cancel, or the upgrade
// request of the WebSocket that sent {"type":"cancel"}), the session id
// and the validated cancel, before anything is written. It may set c.By
// (who asked, recorded in the turn_cancel: the authenticated user, say;
// the rules of a session id, else 400 invalid_argument); the handlers set
// it first to the connection's ?client= (WebSocket) or leave it empty. A
// non-nil error answers 403 forbidden with the error's text, or the
// [*StatusError] it is or wraps, and the log is unchanged. It runs on the
// request's goroutine (the WebSocket's reader) and may block.
type AuthorizeCancelFunc func(r *http.Request, sessionID string, c *frame.TurnData) error
