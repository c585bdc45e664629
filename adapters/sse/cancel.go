package sse

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/textutil"
)

// Cancel posts c as JSON to the stream's cancel route (Client.CancelURL)
// with Client.Header, and reads the answer: 202 {"cancelled", "held"}, or
// the refusal as a *resume.StatusError. It is the SSE transport's
// [resume.Canceller].
func (t *transport) Cancel(ctx context.Context, c resume.CancelRequest) (eventbus.CancelResult, error) {
	target, err := t.cancelURL()
	if err != nil {
		return eventbus.CancelResult{}, err
	}
	if err := textutil.CheckHeader(t.c.Header); err != nil {
		return eventbus.CancelResult{}, fmt.Errorf("sse: Client.Header: %w", err)
	}
	body, _ := json.Marshal(c) // two plain fields
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return eventbus.CancelResult{}, fmt.Errorf("sse: cancel: %w", err)
	}
	for k, v := range t.c.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	hc := t.c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return eventbus.CancelResult{}, fmt.Errorf("sse: cancel: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return eventbus.CancelResult{}, resume.ReadStatusError(resp)
	}
	var res eventbus.CancelResult
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&res); err != nil {
		return eventbus.CancelResult{}, fmt.Errorf("sse: cancel: the answer from %s: %w", target, err)
	}
	return res, nil
}

// cancelURL is Client.CancelURL of the stream's URL, or the URL's path
// with its last segment events replaced by cancel.
func (t *transport) cancelURL() (string, error) {
	if t.c.CancelURL != nil {
		return t.c.CancelURL(t.url), nil
	}
	u, err := url.Parse(t.url)
	if err != nil {
		return "", fmt.Errorf("sse: cancel: %w", err)
	}
	p := u.EscapedPath()
	if !strings.HasSuffix(p, "/events") {
		return "", fmt.Errorf("sse: cancel: stream URL %q does not end in /events: set Client.CancelURL", t.url)
	}
	u.RawPath = strings.TrimSuffix(p, "events") + "cancel"
	u.Path, _ = url.PathUnescape(u.RawPath)
	u.RawQuery, u.Fragment = "", ""
	return u.String(), nil
}
