package eventbus

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/queue"
)

// fillEvent assigns every field of Event: filling an Event that still holds
// another frame (a reused batch buffer, NextBatch) gives exactly what
// filling a zero one does, for records with and without an extension. The
// dirty Event sets every field by reflection, so a field added to Event
// and not to fillEvent fails here.
func TestFillEventSetsEveryField(t *testing.T) {
	recs := []*record{
		{ID: 7, Session: "s", Type: "msg", Data: []byte(`{"a":1}`), Nanos: 1_700_000_000_123_456_789},
		{ID: 9, Session: "t", Type: "chunk", Data: []byte(`2`), Nanos: 5,
			Ext: &queue.Ext{Origin: "o", Count: 3, FirstID: 7}},
		{ID: 11, Session: "t", Type: "img", Data: []byte{1, 2}, Nanos: 6, Ext: &queue.Ext{Media: 1}},
	}
	for _, r := range recs {
		for _, replay := range []bool{false, true} {
			var clean Event
			fillEvent(&clean, r, replay)
			dirty := dirtyEvent(t)
			fillEvent(&dirty, r, replay)
			assert.Equal(t, clean, dirty, "record %d, replay %v", r.ID, replay)
			assert.Equal(t, r.ID, clean.ID)
			assert.Equal(t, replay, clean.Replay)
			assert.Equal(t, time.Unix(0, r.Nanos), clean.Time)
		}
	}
}

// dirtyEvent returns an Event whose every field is non-zero.
func dirtyEvent(t *testing.T) Event {
	var ev Event
	v := reflect.ValueOf(&ev).Elem()
	for i := 0; i < v.NumField(); i++ {
		// Unexported fields too (Event.media): through an addressable
		// copy of the field that reflection may set.
		f := reflect.NewAt(v.Field(i).Type(), unsafe.Pointer(v.Field(i).UnsafeAddr())).Elem()
		switch f.Kind() {
		case reflect.String:
			f.SetString("dirty")
		case reflect.Uint64, reflect.Uint32, reflect.Uint16, reflect.Uint8, reflect.Uint:
			f.SetUint(99)
		case reflect.Int, reflect.Int64, reflect.Int32, reflect.Int16, reflect.Int8:
			f.SetInt(99)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.SetBytes([]byte("dirty"))
		case reflect.Struct:
			f.Set(reflect.ValueOf(time.Unix(99, 99)))
		default:
			t.Fatalf("Event.%s: kind %s not dirtied by the test; extend dirtyEvent", v.Type().Field(i).Name, f.Kind())
		}
		if f.IsZero() {
			t.Fatalf("Event.%s is still zero", v.Type().Field(i).Name)
		}
	}
	return ev
}

// replayCompleteEntry's hand-encoded payload is byte for byte what
// encoding/json makes of frame.ReplayCompleteData (queue.Synth's
// encoding), at the extremes of both fields, and the entry is the frame
// synth would build.
func TestReplayCompleteEntryEncoding(t *testing.T) {
	for _, c := range []struct {
		last  uint64
		n     int
		first uint64
		lost  bool
	}{
		{0, 0, 0, false},
		{1, 1, 1, false},
		{42, 7, 36, false},
		{42, 7, 36, true},
		{0, 0, 0, true},
		{10_000, 10_000, 1, false},
		{math.MaxUint64, math.MaxInt, math.MaxUint64, true},
		{math.MaxUint64, math.MinInt, 0, false},
		{9, -1, 0, true},
	} {
		got := replayCompleteEntry("sess", c.last, c.n, c.first, c.lost, 123)
		want := synth("sess", frame.TypeReplayComplete, frame.ReplayCompleteData{
			LastReplayedEventID: c.last, ReplayedCount: c.n, FirstReplayedEventID: c.first, HistoryLost: c.lost,
		}, 123)
		require.Equal(t, string(want.Rec.Data), string(got.Rec.Data), "%+v", c)
		assert.Equal(t, len(got.Rec.Data), cap(got.Rec.Data), "an append to the payload must not write into the shared allocation")
		got.Rec.Data, want.Rec.Data = nil, nil
		assert.Equal(t, *want.Rec, *got.Rec)
		assert.Equal(t, want.Kind, got.Kind)
	}
}

// The replay loop (replayInto) builds its Events from fillEvent's halves:
// NextBatch into a buffer of dirtied Events gives exactly the frames
// TryNext gives, for records with and without an origin and with a media
// type, so a field fillEvent assigns outside its halves fails here.
func TestReplayIntoSetsEveryField(t *testing.T) {
	bus, err := New(Options{})
	require.NoError(t, err)
	defer bus.Close()
	_, err = bus.PublishJSON("s", "msg", []byte(`{"a":1}`))
	require.NoError(t, err)
	_, err = bus.PublishJSON("s", "chunk", []byte(`2`), WithOrigin("o"))
	require.NoError(t, err)
	_, err = bus.PublishBytes("s", "img", "image/png", []byte{1, 2})
	require.NoError(t, err)

	var want []Event
	ref, err := bus.Subscribe(context.Background(), "s", SubscribeOptions{Cursor: At(0)})
	require.NoError(t, err)
	defer ref.Close()
	for {
		ev, ok := ref.TryNext()
		if !ok {
			break
		}
		want = append(want, ev)
	}
	require.Len(t, want, 4, "three replayed events and replay_complete")

	sub, err := bus.Subscribe(context.Background(), "s", SubscribeOptions{Cursor: At(0)})
	require.NoError(t, err)
	defer sub.Close()
	buf := make([]Event, 8)
	for i := range buf {
		buf[i] = dirtyEvent(t)
	}
	n, err := sub.NextBatch(time.Unix(1, 0), buf)
	require.NoError(t, err)
	require.Equal(t, len(want), n)
	for i := range want[:3] {
		assert.True(t, want[i].Replay, "frame %d", i)
	}
	assert.Equal(t, want[:3], buf[:3])
	// replay_complete is stamped by each subscribe's own clock reading.
	want[3].Time, buf[3].Time = time.Time{}, time.Time{}
	assert.Equal(t, want[3], buf[3])
}
