package codec_test

import (
	"testing"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/adapters/a2a"
	"github.com/replaybus/replaybus/adapters/agui"
	"github.com/replaybus/replaybus/adapters/aisdk"
	"github.com/replaybus/replaybus/codec"
)

// The cost of one streamed text delta, from the bus event to each
// protocol's frame: decode (ACP) then encode.
func BenchmarkTextDelta(b *testing.B) {
	ev := acpEv(&testing.T{}, 1, acp.MessageChunk("hello "))
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		var parts []codec.Part
		for range b.N {
			parts = codec.Default.Decode(parts[:0], ev)
		}
	})
	parts := codec.Default.Decode(nil, ev)
	b.Run("aisdk", func(b *testing.B) {
		b.ReportAllocs()
		enc := aisdk.NewEncoder("m")
		var buf []byte
		for i := range b.N {
			parts[0].ID = uint64(i + 1)
			buf = enc.Append(buf[:0], parts...)
		}
	})
	b.Run("agui", func(b *testing.B) {
		b.ReportAllocs()
		enc := agui.NewEncoder(agui.Options{ThreadID: "s", RunID: "r", Epoch: "e"})
		var buf []byte
		for i := range b.N {
			parts[0].ID = uint64(i + 1)
			buf = enc.Append(buf[:0], parts...)
		}
	})
	b.Run("a2a", func(b *testing.B) {
		b.ReportAllocs()
		enc := a2a.NewEncoder(a2a.Options{TaskID: "t", ContextID: "s"})
		var buf []byte
		for i := range b.N {
			parts[0].ID = uint64(i + 1)
			buf = enc.Append(buf[:0], parts...)
		}
	})
}
