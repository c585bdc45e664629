package nats

import (
	"strconv"
	"strings"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestAckSeqs(t *testing.T) {
	for _, c := range []struct {
		name         string
		reply        string
		stream, cons uint64
		wantErr      bool
	}{
		{"v1", "$JS.ACK.S.C.1.42.7.1700000000000000000.3", 42, 7, false},
		{"v2", "$JS.ACK._.ACCHASH.S.C.2.43.8.1700000000000000000.0.rand", 43, 8, false},
		{"v2 without the last token", "$JS.ACK.dom.ACCHASH.S.C.2.44.9.1700000000000000000.0", 44, 9, false},
		{"non-numeric sequences", "$JS.ACK.S.C.1.x.-1.0.0", 0, 0, false},
		{"20 digits overflow", "$JS.ACK.S.C.1.99999999999999999999.1.0.0", 0, 1, false},
		{"empty", "", 0, 0, true},
		{"8 tokens", "$JS.ACK.S.C.1.42.7.0", 0, 0, true},
		{"10 tokens", "$JS.ACK.S.C.1.42.7.0.0.x", 0, 0, true},
		{"not an ack subject", "$JS.NAK.S.C.1.42.7.0.0", 0, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, d, err := ackSeqs(c.reply)
			if c.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), strconv.Quote(c.reply))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.stream, s)
			assert.Equal(t, c.cons, d)
		})
	}
}

// TestAckSeqsMatchesMetadata: ackSeqs reads what nats.go's metadata parser
// reads, for any subject (numbers up to 19 digits: nats.go's parser
// overflows past them, ackSeqs gives 0).
func TestAckSeqsMatchesMetadata(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		token := rapid.OneOf(
			rapid.StringMatching(`[0-9]{1,19}`),
			rapid.StringMatching(`[A-Za-z0-9_$-]{0,6}`),
		)
		prefix := rapid.SampledFrom([]string{"$JS.ACK.", "$JS.ACK", "$JS.NAK.", ""}).Draw(rt, "prefix")
		toks := rapid.SliceOfN(token, 0, 14).Draw(rt, "tokens")
		reply := prefix + strings.Join(toks, ".")
		s, d, err := ackSeqs(reply)
		meta, merr := (&natsgo.Msg{Reply: reply, Sub: &natsgo.Subscription{}}).Metadata()
		if merr != nil {
			if err == nil {
				rt.Fatalf("ackSeqs(%q) = %d, %d; Metadata: %v", reply, s, d, merr)
			}
			return
		}
		if err != nil {
			rt.Fatalf("ackSeqs(%q): %v; Metadata read it", reply, err)
		}
		if s != meta.Sequence.Stream || d != meta.Sequence.Consumer {
			rt.Fatalf("ackSeqs(%q) = %d, %d; Metadata: %d, %d", reply, s, d, meta.Sequence.Stream, meta.Sequence.Consumer)
		}
	})
}

func BenchmarkAckSeqs(b *testing.B) {
	const reply = "$JS.ACK._.ACCHASH.REPLAYBUS.replaybus_abc_1.1.123456.123456.1764650000000000000.0.rand"
	b.Run("ackSeqs", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, _, err := ackSeqs(reply); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Metadata", func(b *testing.B) {
		b.ReportAllocs()
		m := &natsgo.Msg{Reply: reply, Sub: &natsgo.Subscription{}}
		for range b.N {
			if _, err := m.Metadata(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
