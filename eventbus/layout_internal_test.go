package eventbus

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The layout of a Subscription (see its fields' comment): what a lock-free
// delivery touches (waiting, filter, the publisher's half of q) stays in
// the first 128 bytes — two cache lines, the size class keeping every
// Subscription 64-byte aligned — and what the consumer writes at a drain
// (q's second half, mu) or on every event stays off them.
func TestSubscriptionLayout(t *testing.T) {
	var s Subscription
	type field struct {
		name      string
		off, size uintptr
	}
	const lines = 128
	delivery := []field{
		{"waiting", unsafe.Offsetof(s.waiting), unsafe.Sizeof(s.waiting)},
		{"filter", unsafe.Offsetof(s.filter), unsafe.Sizeof(s.filter)},
		// The queue's publisher half: TestQueueLayout (internal/queue)
		// keeps it within the first 112 bytes of a Queue.
		{"q's publisher half", unsafe.Offsetof(s.q), lines - 16},
	}
	consumer := []field{
		{"mu", unsafe.Offsetof(s.mu), unsafe.Sizeof(s.mu)},
		{"discard", unsafe.Offsetof(s.discard), unsafe.Sizeof(s.discard)},
		{"co", unsafe.Offsetof(s.co), unsafe.Sizeof(s.co)},
		{"lead", unsafe.Offsetof(s.lead), unsafe.Sizeof(s.lead)},
		{"rd", unsafe.Offsetof(s.rd), unsafe.Sizeof(s.rd)},
		{"lastSeen", unsafe.Offsetof(s.lastSeen), unsafe.Sizeof(s.lastSeen)},
	}
	for _, f := range delivery {
		assert.LessOrEqual(t, f.off+f.size, uintptr(lines), "delivery field %s ends at byte %d", f.name, f.off+f.size)
	}
	assert.EqualValues(t, 16, unsafe.Offsetof(s.q), "q's second half must start at byte 128")
	// Size classes 385–448 bytes hold 448-byte objects: 7 cache lines, so
	// every Subscription starts on a line.
	require.Greater(t, unsafe.Sizeof(s), uintptr(384), "Subscription left its 448-byte size class: its alignment changes; lay its fields out again")
	require.LessOrEqual(t, unsafe.Sizeof(s), uintptr(448), "Subscription left its 448-byte size class: its alignment changes; lay its fields out again")
	for _, f := range consumer {
		assert.GreaterOrEqual(t, f.off, uintptr(lines), "consumer field %s starts at byte %d, on a delivery line", f.name, f.off)
	}
}
