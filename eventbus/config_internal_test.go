package eventbus

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// errs splits an errors.Join result into its messages.
func errs(err error) []string {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range j.Unwrap() {
		out = append(out, e.Error())
	}
	return out
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Options
		want []string
	}{
		{name: "zero config is valid", cfg: Options{}},
		{name: "defaults are valid", cfg: Options{}.WithDefaults()},
		{name: "upper bounds are valid", cfg: Options{
			ReplayBufferSize: maxCount, MaxQueueSize: maxCount, MaxQueuedBytes: maxBytes,
			MaxSubscribers: maxCount, SessionTTL: maxSessionTTL, OverflowPolicy: DropNewest,
			DroppableTypes: []string{"agent_message_chunk", "agent_thought_chunk"}, ReplayBudgetBytes: maxBytes,
		}},
		{name: "lower bounds are valid", cfg: Options{
			ReplayBufferSize: 1, MaxQueueSize: 1, MaxQueuedBytes: 1, MaxSubscribers: 1,
			SessionTTL: minSessionTTL, ReplayBudgetBytes: 1,
		}},
		{name: "ReplayBufferSize negative", cfg: Options{ReplayBufferSize: -5},
			want: []string{"eventbus: ReplayBufferSize=-5: out of range [1, 1000000]"}},
		{name: "ReplayBufferSize too large", cfg: Options{ReplayBufferSize: 2_000_000},
			want: []string{"eventbus: ReplayBufferSize=2000000: out of range [1, 1000000]"}},
		{name: "MaxQueueSize negative", cfg: Options{MaxQueueSize: -1},
			want: []string{"eventbus: MaxQueueSize=-1: out of range [1, 1000000]"}},
		{name: "MaxQueuedBytes too large", cfg: Options{MaxQueuedBytes: maxBytes + 1},
			want: []string{"eventbus: MaxQueuedBytes=1073741825: out of range [1B, 1GiB]"}},
		{name: "MaxSubscribers negative", cfg: Options{MaxSubscribers: -64},
			want: []string{"eventbus: MaxSubscribers=-64: out of range [1, 1000000]"}},
		{name: "SessionTTL negative", cfg: Options{SessionTTL: -time.Second},
			want: []string{"eventbus: SessionTTL=-1s: out of range [1s, 8760h]"}},
		{name: "SessionTTL too short", cfg: Options{SessionTTL: 999 * time.Millisecond},
			want: []string{"eventbus: SessionTTL=999ms: out of range [1s, 8760h]"}},
		{name: "SessionTTL too long", cfg: Options{SessionTTL: maxSessionTTL + 1},
			want: []string{"eventbus: SessionTTL=8760h0m0.000000001s: out of range [1s, 8760h]"}},
		{name: "OverflowPolicy unknown", cfg: Options{OverflowPolicy: "fifo"},
			want: []string{`eventbus: OverflowPolicy="fifo": unknown overflow policy (want drop_subscriber, drop_oldest or drop_newest)`}},
		{name: "DroppableTypes empty entry", cfg: Options{DroppableTypes: []string{"a", ""}},
			want: []string{`eventbus: DroppableTypes=["a" ""]: empty entry`}},
		{name: "DroppableTypes newline", cfg: Options{DroppableTypes: []string{"a\nb"}},
			want: []string{`eventbus: DroppableTypes=["a\nb"]: entry "a\nb" contains white space or a control character`}},
		{name: "ReplayBudgetBytes negative", cfg: Options{ReplayBudgetBytes: -1},
			want: []string{"eventbus: ReplayBudgetBytes=-1: out of range [1B, 1GiB]"}},
		{name: "turn and presence bounds are valid", cfg: Options{PresenceGrace: 100 * time.Millisecond, CancelHold: time.Hour, TurnLease: time.Second}},
		{name: "PresenceGrace too short", cfg: Options{PresenceGrace: time.Millisecond},
			want: []string{"eventbus: PresenceGrace=1ms: out of range [100ms, 1h]"}},
		{name: "CancelHold negative", cfg: Options{CancelHold: -time.Second},
			want: []string{"eventbus: CancelHold=-1s: out of range [1s, 1h]"}},
		{name: "TurnLease too long", cfg: Options{TurnLease: 6 * time.Minute},
			want: []string{"eventbus: TurnLease=6m0s: out of range [1s, 5m]"}},
		{name: "every problem at once", cfg: Options{ReplayBufferSize: -1, MaxQueueSize: -2, MaxQueuedBytes: -3,
			MaxSubscribers: -4, SessionTTL: -5, OverflowPolicy: "block", DroppableTypes: []string{" "}, ReplayBudgetBytes: -6},
			want: []string{
				"eventbus: ReplayBufferSize=-1: out of range [1, 1000000]",
				"eventbus: MaxQueueSize=-2: out of range [1, 1000000]",
				"eventbus: MaxQueuedBytes=-3: out of range [1B, 1GiB]",
				"eventbus: MaxSubscribers=-4: out of range [1, 1000000]",
				"eventbus: SessionTTL=-5ns: out of range [1s, 8760h]",
				`eventbus: OverflowPolicy="block": refused: block would stall every publisher behind one slow subscriber (want drop_subscriber, drop_oldest or drop_newest)`,
				`eventbus: DroppableTypes=[" "]: entry " " contains white space or a control character`,
				"eventbus: ReplayBudgetBytes=-6: out of range [1B, 1GiB]",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			assert.Equal(t, tt.want, errs(err))
			for _, e := range errs(err) {
				assert.True(t, strings.HasPrefix(e, "eventbus: "), e)
			}
			if err != nil {
				var fe *OptionError
				require.ErrorAs(t, err, &fe)
				assert.NotEmpty(t, fe.Field)
			}
		})
	}
}

func TestOverflowPolicyValidate(t *testing.T) {
	tests := []struct {
		p    OverflowPolicy
		want string
	}{
		{DropSubscriber, ""},
		{DropOldest, ""},
		{DropNewest, ""},
		{"block", `eventbus: invalid argument: overflow policy "block": refused: block would stall every publisher behind one slow subscriber (want drop_subscriber, drop_oldest or drop_newest)`},
		{"", `eventbus: invalid argument: overflow policy "": unknown overflow policy (want drop_subscriber, drop_oldest or drop_newest)`},
		{"Drop_Oldest", `eventbus: invalid argument: overflow policy "Drop_Oldest": unknown overflow policy (want drop_subscriber, drop_oldest or drop_newest)`},
	}
	for _, tt := range tests {
		t.Run(string(tt.p), func(t *testing.T) {
			t.Parallel()
			err := tt.p.validate()
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tt.want)
			assert.ErrorIs(t, err, ErrInvalid)
		})
	}
}
