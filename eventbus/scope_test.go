package eventbus_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// The tree of the scope tests:
//
//	P ─┬─ X ─── C ─── G        U (unrelated root)
//	   └─ S ─── N (nephew)
//
// created after subscribing: L under X, LG under C, S2 under P, N2 under S.
func TestScopes(t *testing.T) {
	t.Parallel()
	early := []string{"P", "X", "C", "G", "S", "N", "U"}
	late := []string{"L", "LG", "S2", "N2"}
	tests := []struct {
		kind scope.Kind
		want []string // sessions whose events arrive
	}{
		{scope.Session, []string{"X"}},
		{scope.Descendants, []string{"X", "C", "G", "L", "LG"}},
		{scope.Subtree, []string{"X", "P", "S", "S2"}},
		{scope.All, append(slices.Clone(early), late...)},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String(), func(t *testing.T) {
			t.Parallel()
			b := newBus(t, eventbus.Options{})
			for _, e := range [][2]string{{"P", ""}, {"X", "P"}, {"C", "X"}, {"G", "C"}, {"S", "P"}, {"N", "S"}, {"U", ""}} {
				require.NoError(t, b.CreateSession(e[0], e[1]))
			}
			in := func(sess string) bool { return slices.Contains(tt.want, sess) }
			var wantReplay, wantLive []uint64
			for _, sess := range early {
				ev, err := b.Publish(sess, "msg", sess)
				require.NoError(t, err)
				if in(sess) {
					wantReplay = append(wantReplay, ev.ID)
				}
			}
			s := subscribe(t, b, "X", eventbus.SubscribeOptions{Scope: tt.kind, Cursor: eventbus.At(0)})
			for _, e := range [][2]string{{"L", "X"}, {"LG", "C"}, {"S2", "P"}, {"N2", "S"}} {
				require.NoError(t, b.CreateSession(e[0], e[1]))
			}
			for _, sess := range append(slices.Clone(early), late...) {
				ev, err := b.Publish(sess, "msg", sess)
				require.NoError(t, err)
				if in(sess) {
					wantLive = append(wantLive, ev.ID)
				}
			}
			got := drain(s)
			n := len(wantReplay)
			require.Len(t, got, n+1+len(wantLive), "%v", describe(got))
			assert.Equal(t, wantReplay, ids(got[:n]), "replay, merged by id")
			assert.Equal(t, frame.TypeReplayComplete, got[n].Type)
			assert.Equal(t, wantLive, ids(got[n+1:]), "live")
			for _, e := range got {
				if e.ID != 0 {
					assert.True(t, in(e.Session), "event of %s", e.Session)
					assert.Equal(t, e.ID <= wantReplay[n-1], e.Replay)
				}
			}
		})
	}
}
