package serve

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
)

// CancelTimeout bounds one cancel's wait for the bus (over a backend, for
// the turn_cancel to be stored): a 503 unavailable when it passes.
const CancelTimeout = 5 * time.Second

// Cancel applies a client's cancel c, sent by r, to session sessionID, as
// POST /session/{id}/cancel and the WebSocket cancel message both do: by
// (the connection's client id, or "") as who asked, then authorize (nil:
// everyone may; a refusal is 403 forbidden with the error's text, or the
// *resume.StatusError it is or wraps), then [eventbus.Bus.Cancel] within
// CancelTimeout of ctx. A refusal of any kind is returned as the
// *resume.StatusError to answer (resume.StatusFor maps the bus's errors:
// 404, 410, 409 turn_ended, 400, 503), and nothing is written to the log.
// The result's lists are empty, never nil, when they name no turn.
func Cancel(ctx context.Context, bus *eventbus.Bus, r *http.Request, sessionID string, c resume.CancelRequest, by string, authorize resume.AuthorizeCancelFunc) (eventbus.CancelResult, error) {
	d := c.Data(by)
	if authorize != nil {
		if err := authorize(r, sessionID, &d); err != nil {
			var se *resume.StatusError
			if !errors.As(err, &se) {
				se = &resume.StatusError{Status: http.StatusForbidden, Code: resume.CodeForbidden, Message: err.Error()}
			}
			return eventbus.CancelResult{}, se
		}
	}
	ctx, cancel := context.WithTimeout(ctx, CancelTimeout)
	defer cancel()
	res, err := bus.Cancel(ctx, sessionID, d)
	if err != nil {
		return eventbus.CancelResult{}, resume.StatusFor(err, sessionID)
	}
	// Lists, never null, on the wire: "nothing was active" is [].
	if res.Cancelled == nil {
		res.Cancelled = []string{}
	}
	if res.Held == nil {
		res.Held = []string{}
	}
	return res, nil
}
