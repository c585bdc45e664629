package eventbus

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The layout of a Subscription (see its fields' comment): what a delivery
// touches stays first and within 96 bytes — two cache lines at the 32-byte
// alignment its size class gives it — and what the consumer touches on
// every event stays off those lines, at either alignment, and off the
// lines the neighbouring subscriptions' deliveries touch.
func TestSubscriptionLayout(t *testing.T) {
	var s Subscription
	type field struct {
		name      string
		off, size uintptr
	}
	delivery := []field{
		{"mu", unsafe.Offsetof(s.mu), unsafe.Sizeof(s.mu)},
		{"ended", unsafe.Offsetof(s.ended), unsafe.Sizeof(s.ended)},
		{"waiting", unsafe.Offsetof(s.waiting), unsafe.Sizeof(s.waiting)},
		{"filter", unsafe.Offsetof(s.filter), unsafe.Sizeof(s.filter)},
		{"sess", unsafe.Offsetof(s.sess), unsafe.Sizeof(s.sess)},
		{"q", unsafe.Offsetof(s.q), unsafe.Sizeof(s.q)},
	}
	consumer := []field{
		{"discard", unsafe.Offsetof(s.discard), unsafe.Sizeof(s.discard)},
		{"co", unsafe.Offsetof(s.co), unsafe.Sizeof(s.co)},
		{"lead", unsafe.Offsetof(s.lead), unsafe.Sizeof(s.lead)},
		{"rd", unsafe.Offsetof(s.rd), unsafe.Sizeof(s.rd)},
		{"lastSeen", unsafe.Offsetof(s.lastSeen), unsafe.Sizeof(s.lastSeen)},
	}
	for _, f := range delivery {
		assert.LessOrEqual(t, f.off+f.size, uintptr(96), "delivery field %s ends at byte %d", f.name, f.off+f.size)
	}
	// Allocated at a multiple of 32 bytes (the size class rounds the size
	// up to one): the delivery fields' lines end at byte 128 at most, and
	// the line before them holds the previous object's last 32 bytes.
	const size = 352 // the size class the layout was made for
	require.LessOrEqual(t, unsafe.Sizeof(s), uintptr(size),
		"Subscription outgrew its 352-byte size class: its alignment changes; lay its fields out again")
	for _, f := range consumer {
		assert.GreaterOrEqual(t, f.off, uintptr(128), "consumer field %s starts at byte %d, on a delivery line", f.name, f.off)
		assert.LessOrEqual(t, f.off+f.size, uintptr(size-32), "consumer field %s ends at byte %d, on the next subscription's delivery line", f.name, f.off+f.size)
	}
}
