package eventbus

import (
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"

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
