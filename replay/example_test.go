package replay_test

import (
	"fmt"

	"github.com/replaybus/replaybus/replay"
)

type event struct {
	ID   uint64
	Text string
}

func ExampleBuffer() {
	// Keep the newest three events, as deque(maxlen=3) would.
	buf, err := replay.New(3, func(e *event) uint64 { return e.ID })
	if err != nil {
		panic(err)
	}
	for id := uint64(1); id <= 5; id++ {
		if old, dropped := buf.Append(event{ID: id, Text: fmt.Sprint("chunk ", id)}); dropped {
			fmt.Println("dropped", old.ID)
		}
	}
	fmt.Println(buf.Replay(0))
	fmt.Println(buf.Replay(2))
	fmt.Println(buf.Len(), buf.Cap(), buf.FirstID(), buf.LastID(), buf.HighestEvicted())
	// Output:
	// dropped 1
	// dropped 2
	// [{3 chunk 3} {4 chunk 4} {5 chunk 5}]
	// [{4 chunk 4} {5 chunk 5}]
	// 3 3 3 5 2
}

// A client reconnects with Last-Event-ID; the buffer tells what it missed
// and whether older events it never saw are gone.
func ExampleBuffer_AppendAfter() {
	buf, _ := replay.New(4, func(e *event) uint64 { return e.ID })
	for id := uint64(1); id <= 6; id++ {
		buf.Append(event{ID: id})
	}
	for _, cursor := range []uint64{4, 1} {
		missed := buf.AppendAfter(nil, cursor)
		lost := cursor < buf.HighestEvicted()
		fmt.Printf("cursor %d: replay %d events from id %d, lost events: %v\n",
			cursor, len(missed), missed[0].ID, lost)
	}
	// Output:
	// cursor 4: replay 2 events from id 5, lost events: false
	// cursor 1: replay 4 events from id 3, lost events: true
}

func ExampleNew() {
	_, err := replay.New[event](0, nil)
	fmt.Println(err)
	// Output:
	// replay: capacity 0 out of range [1, 1000000]
}
