package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/examples/agentserver/server"
	"github.com/replaybus/replaybus/internal/testkit"
)

// curlStream runs `curl -sN [args] url` and returns its frames as events,
// decoded with the sse package, until it has seen the event with id last;
// then it stops curl.
func curlStream(t *testing.T, curl, url string, last uint64, args ...string) []eventbus.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, curl, append(append([]string{"-sN"}, args...), url)...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	dec := sse.NewDecoder(out)
	var evs []eventbus.Event
	for {
		f, err := dec.Next()
		require.NoError(t, err, "reading curl's output")
		ev, err := sse.DecodeEvent(f)
		require.NoError(t, err)
		evs = append(evs, ev)
		if ev.ID == last {
			return evs
		}
	}
}

// curlJSON runs curl once and returns the status code and the JSON body.
func curlJSON(t *testing.T, curl string, args ...string) (int, map[string]any) {
	t.Helper()
	out, err := exec.Command(curl, append([]string{"-s", "-w", "\n%{http_code}"}, args...)...).Output()
	require.NoError(t, err)
	text := strings.TrimSpace(string(out))
	i := strings.LastIndexByte(text, '\n')
	body, code := strings.TrimSpace(text[:max(i, 0)]), text[i+1:]
	var m map[string]any
	if body != "" {
		require.NoError(t, json.Unmarshal([]byte(body), &m), "body %q", body)
	}
	status, err := strconv.Atoi(code)
	require.NoError(t, err, "status %q", code)
	return status, m
}

// TestCurl runs the README's curl commands against the server: publish with
// curl -d, stream with curl -N (the buffer replayed, then live events),
// resume with -H 'Last-Event-ID: N', and a malformed cursor answered 400.
func TestCurl(t *testing.T) {
	curl := needTool(t, "curl")
	ts := startServer(t, eventbus.Options{}, server.Options{})
	base := ts.ts.URL

	status, body := curlJSON(t, curl, "-H", "Content-Type: application/json", "-d", `{"id":"demo"}`, base+"/sessions")
	require.Equal(t, 201, status, "%v", body)
	for i := 1; i <= 5; i++ {
		status, body = curlJSON(t, curl, "-H", "Content-Type: application/json", "-d", `{"type":"note","data":{"n":`+itoa(i)+`}}`, base+"/session/demo/events")
		require.Equal(t, 202, status, "%v", body)
		assert.EqualValues(t, i, body["id"])
	}

	// curl -N localhost:8080/session/demo/events: replay 1…5, then live 6…8.
	go func() {
		assert.Eventually(t, func() bool { return testkit.SubscriberCounts(ts.bus)["demo"] == 1 }, 10*time.Second, 5*time.Millisecond)
		for i := 6; i <= 8; i++ {
			_, err := ts.bus.Publish("demo", "note", map[string]int{"n": i})
			assert.NoError(t, err)
		}
	}()
	evs := curlStream(t, curl, base+"/session/demo/events", 8)
	var ids []uint64
	for _, ev := range evs {
		ids = append(ids, ev.ID)
		assert.Equal(t, ev.ID <= 5, ev.Replay, "id %d: replayed iff published before the connect", ev.ID)
	}
	assert.Equal(t, []uint64{1, 2, 3, 4, 5, 6, 7, 8}, ids)
	require.Eventually(t, func() bool { return testkit.SubscriberCounts(ts.bus)["demo"] == 0 }, 5*time.Second, 5*time.Millisecond,
		"curl's exit frees its subscriber")

	// curl -N -H 'Last-Event-ID: 6' …: 7 and 8 replayed, replay_complete, then live 9.
	go func() {
		assert.Eventually(t, func() bool { return testkit.SubscriberCounts(ts.bus)["demo"] == 1 }, 10*time.Second, 5*time.Millisecond)
		_, err := ts.bus.Publish("demo", "note", map[string]int{"n": 9})
		assert.NoError(t, err)
	}()
	evs = curlStream(t, curl, base+"/session/demo/events", 9, "-H", "Last-Event-ID: 6")
	var got []string
	for _, ev := range evs {
		s := ev.Type
		if ev.ID != 0 {
			s = itoa(int(ev.ID))
			if ev.Replay {
				s += "r"
			}
		}
		got = append(got, s)
	}
	assert.Equal(t, []string{"7r", "8r", frame.TypeReplayComplete, "9"}, got)
	assert.JSONEq(t, `{"lastReplayedEventId":8,"replayedCount":2,"firstReplayedEventId":7}`, string(evs[2].Data))

	// A malformed cursor is refused before any stream starts.
	status, body = curlJSON(t, curl, "-H", "Last-Event-ID: abc", base+"/session/demo/events")
	assert.Equal(t, 400, status)
	assert.Equal(t, resume.CodeInvalidLastEventID, body["code"])

	// DELETE ends the session.
	status, _ = curlJSON(t, curl, "-X", "DELETE", base+"/session/demo")
	assert.Equal(t, 204, status)
	status, body = curlJSON(t, curl, base+"/session/demo/events")
	assert.Equal(t, 410, status)
	assert.Equal(t, resume.CodeSessionClosed, body["code"])
}
