package sse_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

// TestOnSubscribeTargeted: OnSubscribe hands each stream its subscription;
// a targeted frame sent there reaches that stream only, without an id: line,
// after the replay, and a resume never brings it back.
func TestOnSubscribeTargeted(t *testing.T) {
	b := newBus(t, eventbus.Options{})
	var mu sync.Mutex
	subs := map[string]*eventbus.Subscription{}
	h := newHandler(t, b, sse.HandlerOptions{OnSubscribe: func(r *http.Request, sub *eventbus.Subscription) {
		mu.Lock()
		subs[r.URL.Query().Get("who")] = sub
		mu.Unlock()
		assert.NoError(t, b.SendTo("hello", map[string]string{"who": r.URL.Query().Get("who")}, sub))
	}})
	srv := serve(t, h, nil)
	require.NoError(t, b.CreateSession("s1", ""))
	publish(t, b, "s1", "msg", 1)

	a := openRaw(t, srv.URL+"/session/s1/events?who=a", nil)
	c := openRaw(t, srv.URL+"/session/s1/events?who=c", nil)
	first := a.next(t)
	assert.EqualValues(t, 1, first.ID)
	assert.True(t, first.Replay)
	hello := a.next(t)
	assert.Equal(t, "hello", hello.Type)
	assert.Zero(t, hello.ID)
	assert.JSONEq(t, `{"who":"a"}`, string(hello.Data))
	assert.EqualValues(t, 1, c.next(t).ID)
	assert.JSONEq(t, `{"who":"c"}`, string(c.next(t).Data), "each stream its own")

	mu.Lock()
	sa := subs["a"]
	mu.Unlock()
	require.NoError(t, b.SendTo("prompt", "for a", sa))
	publish(t, b, "s1", "msg", 2)
	assert.Equal(t, "prompt", a.next(t).Type)
	assert.EqualValues(t, 2, a.next(t).ID, "in order, no id consumed")
	assert.EqualValues(t, 2, c.next(t).ID, "c never sees a's frame")

	// A resume from 0 replays the published events only (the hook greets
	// the new stream afresh).
	r := openRaw(t, srv.URL+"/session/s1/events?who=r&lastEventId=0", nil)
	var types []string
	for range 4 {
		types = append(types, r.next(t).Type)
	}
	assert.Equal(t, []string{"msg", "msg", "replay_complete", "hello"}, types)
}
