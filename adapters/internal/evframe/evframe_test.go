package evframe

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFlushNamesEachFrame(t *testing.T) {
	t.Parallel()
	q := Queue{Epoch: "ep"}
	for _, f := range []Frame{{Event: 3, Data: []byte("a")}, {Event: 3, Data: []byte("b")}, {Event: 0, Data: []byte("x")}, {Event: 4, Data: []byte("c")}} {
		q.Add(f)
	}
	assert.Equal(t, "id: ep-3:0\ndata: a\n\nid: ep-3\ndata: b\n\ndata: x\n\nid: ep-4\ndata: c\n\n", string(q.Flush(nil, nil)))
	assert.Empty(t, q.Flush(nil, nil), "the queue is empty after a flush")
}

func TestSkip(t *testing.T) {
	t.Parallel()
	q := Queue{}
	var seen []string
	each := func(dst []byte, f Frame, written bool) []byte {
		if written {
			seen = append(seen, "+"+string(f.Data))
		} else {
			seen = append(seen, "-"+string(f.Data))
		}
		return dst
	}
	q.Skip(2)
	for _, d := range []string{"a", "b", "c"} {
		q.Add(Frame{Event: 7, Data: []byte(d)})
	}
	assert.Equal(t, "id: 7\ndata: c\n\n", string(q.Flush(nil, each)), "the last frame keeps the event's plain id")
	assert.Equal(t, []string{"-a", "-b", "+c"}, seen)
	assert.False(t, q.Skipping())
	q.Skip(-1)
	q.Add(Frame{Event: 8, Data: []byte("d")})
	assert.Empty(t, q.Flush(nil, nil))
	assert.True(t, q.Skipping(), "skipping all until told otherwise")
}
