package eventbus

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus/internal/queue"
)

// The media type table is bounded: once it holds 4,096 distinct types a
// new one is refused, naming it, while known ones and JSON still work.
// (Not parallel: it fills the process's table for a moment.)
func TestMediaTableIsBounded(t *testing.T) {
	known, err := internMedia("text/x-known")
	require.NoError(t, err)
	mediaTab.mu.Lock()
	n := mediaTab.n
	mediaTab.n = maxMediaTypes
	mediaTab.mu.Unlock()
	t.Cleanup(func() {
		mediaTab.mu.Lock()
		mediaTab.n = n
		mediaTab.mu.Unlock()
	})
	_, err = internMedia("text/x-one-too-many")
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, `media type "text/x-one-too-many": this process already knows 4096 distinct media types (the limit)`)
	id, err := internMedia("text/x-known")
	require.NoError(t, err)
	require.Equal(t, known, id)
	id, err = internMedia("application/json; charset=utf-8")
	require.NoError(t, err)
	require.Zero(t, id)
	require.Equal(t, "text/x-known", mediaName(known))
	// application/octet-stream was interned at startup: it always resolves,
	// the fallback of a decoder (adapters/nats) on a full table.
	id, err = internMedia("application/octet-stream")
	require.NoError(t, err)
	require.Equal(t, uint32(1), id)
	ev, err := Event{Data: []byte{1}}.WithContentType("Application/Octet-Stream")
	require.NoError(t, err)
	require.Equal(t, "application/octet-stream", ev.ContentType())
}

// The media type costs a JSON record nothing: a record stays 80 bytes and
// its extension, which an origin or a fold allocates, 48 (size classes).
func TestRecordSizes(t *testing.T) {
	require.EqualValues(t, 80, unsafe.Sizeof(record{}))
	require.EqualValues(t, 48, unsafe.Sizeof(queue.Ext{}))
	require.Nil(t, extOf("", 0), "a JSON event without origin has no extension")
}
