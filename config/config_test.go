package config

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
)

// The tests in this file use t.Setenv, so none of them is parallel.

// clearEnv unsets every AGENTPOOL_EVENTBUS_* variable for the duration of
// the test (t.Setenv restores them afterwards).
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(strings.ToUpper(k), Prefix) {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
}

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

func TestLoadDefaults(t *testing.T) {
	clearEnv(t)
	cfg, err := Load()
	require.NoError(t, err)
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"REPLAY_BUFFER_SIZE", cfg.ReplayBufferSize, 100},
		{"MAX_QUEUE_SIZE", cfg.MaxQueueSize, 1000},
		{"MAX_QUEUED_BYTES", cfg.MaxQueuedBytes, int64(2 << 20)},
		{"MAX_SUBSCRIBERS", cfg.MaxSubscribers, 64},
		{"SESSION_TTL", cfg.SessionTTL, time.Hour},
		{"OVERFLOW_POLICY", cfg.OverflowPolicy, eventbus.OverflowPolicy("")}, // unset: the default rule applies where subscribers are made
		{"DROPPABLE_TYPES", cfg.DroppableTypes, []string(nil)},
		{"REPLAY_BUDGET_BYTES", cfg.ReplayBudgetBytes, int64(8 << 20)},
		{"DISABLE_SLOW_CLIENT_WARNING", cfg.DisableSlowClientWarning, false},
		{"CLOSED_RETENTION", cfg.ClosedRetention, 10 * time.Minute},
		{"MAX_RETAINED", cfg.MaxRetained, 1000},
		{"REPLAY_MAX_BYTES", cfg.ReplayMaxBytes, int64(0)},
		{"REPLAY_MAX_AGE", cfg.ReplayMaxAge, time.Duration(0)},
		{"PRESENCE_GRACE", cfg.PresenceGrace, 15 * time.Second},
		{"CANCEL_HOLD", cfg.CancelHold, 30 * time.Second},
		{"TURN_LEASE", cfg.TurnLease, 5 * time.Second},
	}
	require.Len(t, tests, len(fields), "one row per variable")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
	assert.Equal(t, eventbus.Options{}.WithDefaults(), cfg)

	// The NATS variables (adapters/nats's options, read by LoadNATS): unset
	// is zero, which adapters/nats takes as its defaults (retention 20, no
	// max age: TestStreamDefaults there).
	n, err := LoadNATS()
	require.NoError(t, err)
	assert.Equal(t, NATS{}, n)
	require.Len(t, natsFields, 5, "one row per NATS variable")
}

func TestLoadEmptyMeansDefault(t *testing.T) {
	clearEnv(t)
	for _, f := range fields {
		t.Setenv(f.key, "")
	}
	cfg, err := Load()
	require.NoError(t, err)
	assert.Equal(t, eventbus.Options{}.WithDefaults(), cfg)
}

func TestLoadValid(t *testing.T) {
	tests := []struct {
		key   string
		value string
		got   func(eventbus.Options) any
		want  any
	}{
		{"REPLAY_BUFFER_SIZE", "200", func(c eventbus.Options) any { return c.ReplayBufferSize }, 200},
		{"REPLAY_BUFFER_SIZE", "1", func(c eventbus.Options) any { return c.ReplayBufferSize }, 1},
		{"REPLAY_BUFFER_SIZE", "1000000", func(c eventbus.Options) any { return c.ReplayBufferSize }, 1_000_000},
		{"REPLAY_BUFFER_SIZE", "+7", func(c eventbus.Options) any { return c.ReplayBufferSize }, 7},
		{"MAX_QUEUE_SIZE", "16", func(c eventbus.Options) any { return c.MaxQueueSize }, 16},
		{"MAX_QUEUED_BYTES", "1048576", func(c eventbus.Options) any { return c.MaxQueuedBytes }, int64(1 << 20)},
		{"MAX_QUEUED_BYTES", "2MiB", func(c eventbus.Options) any { return c.MaxQueuedBytes }, int64(2 << 20)},
		{"MAX_QUEUED_BYTES", "512KiB", func(c eventbus.Options) any { return c.MaxQueuedBytes }, int64(512 << 10)},
		{"MAX_QUEUED_BYTES", "1GiB", func(c eventbus.Options) any { return c.MaxQueuedBytes }, int64(1 << 30)},
		{"MAX_QUEUED_BYTES", "100KB", func(c eventbus.Options) any { return c.MaxQueuedBytes }, int64(100_000)},
		{"MAX_QUEUED_BYTES", "100kB", func(c eventbus.Options) any { return c.MaxQueuedBytes }, int64(100_000)},
		{"MAX_QUEUED_BYTES", "3MB", func(c eventbus.Options) any { return c.MaxQueuedBytes }, int64(3_000_000)},
		{"MAX_QUEUED_BYTES", "1GB", func(c eventbus.Options) any { return c.MaxQueuedBytes }, int64(1_000_000_000)},
		{"MAX_QUEUED_BYTES", "1B", func(c eventbus.Options) any { return c.MaxQueuedBytes }, int64(1)},
		{"MAX_SUBSCRIBERS", "1", func(c eventbus.Options) any { return c.MaxSubscribers }, 1},
		{"SESSION_TTL", "30m", func(c eventbus.Options) any { return c.SessionTTL }, 30 * time.Minute},
		{"SESSION_TTL", "1s", func(c eventbus.Options) any { return c.SessionTTL }, time.Second},
		{"SESSION_TTL", "8760h", func(c eventbus.Options) any { return c.SessionTTL }, 8760 * time.Hour},
		{"OVERFLOW_POLICY", "drop_oldest", func(c eventbus.Options) any { return c.OverflowPolicy }, eventbus.DropOldest},
		{"OVERFLOW_POLICY", "drop_newest", func(c eventbus.Options) any { return c.OverflowPolicy }, eventbus.DropNewest},
		{"OVERFLOW_POLICY", "drop_subscriber", func(c eventbus.Options) any { return c.OverflowPolicy }, eventbus.DropSubscriber},
		{"DROPPABLE_TYPES", "agent_message_chunk", func(c eventbus.Options) any { return c.DroppableTypes }, []string{"agent_message_chunk"}},
		{"DROPPABLE_TYPES", " a , b,,\tc ,a,", func(c eventbus.Options) any { return c.DroppableTypes }, []string{"a", "b", "c"}},
		{"DROPPABLE_TYPES", " , ,", func(c eventbus.Options) any { return c.DroppableTypes }, []string(nil)},
		{"REPLAY_BUDGET_BYTES", "64KiB", func(c eventbus.Options) any { return c.ReplayBudgetBytes }, int64(64 << 10)},
		{"DISABLE_SLOW_CLIENT_WARNING", "true", func(c eventbus.Options) any { return c.DisableSlowClientWarning }, true},
		{"REPLAY_MAX_BYTES", "256KiB", func(c eventbus.Options) any { return c.ReplayMaxBytes }, int64(256 << 10)},
		{"REPLAY_MAX_BYTES", "0", func(c eventbus.Options) any { return c.ReplayMaxBytes }, int64(0)},
		{"REPLAY_MAX_AGE", "10m", func(c eventbus.Options) any { return c.ReplayMaxAge }, 10 * time.Minute},
		{"DISABLE_SLOW_CLIENT_WARNING", "1", func(c eventbus.Options) any { return c.DisableSlowClientWarning }, true},
		{"DISABLE_SLOW_CLIENT_WARNING", "false", func(c eventbus.Options) any { return c.DisableSlowClientWarning }, false},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(Prefix+tt.key, tt.value)
			cfg, err := Load()
			require.NoError(t, err)
			assert.Equal(t, tt.want, tt.got(cfg))
		})
	}
}

func TestLoadBadValue(t *testing.T) {
	const (
		countRange = ": out of range [1, 1000000]"
		bytesRange = ": out of range [1B, 1GiB]"
		ttlRange   = ": out of range [1s, 8760h]"
		notInt     = ": not an integer"
		notSize    = ": not a byte size (want an integer, optionally with a leading + and, with no space, one of the suffixes KiB, MiB, GiB, TiB, kB, KB, MB, GB, TB, B: 2MiB, 512KiB, 100KB)"
		notDur     = ": not a Go duration (for example 90s, 30m or 2h)"
	)
	tests := []struct {
		key     string
		value   string
		want    string // the error text without the variable name
		wantErr error
	}{
		{"REPLAY_BUFFER_SIZE", "abc", `="abc"` + notInt, eventbus.ErrInvalid},
		{"REPLAY_BUFFER_SIZE", "0", `=0` + countRange, eventbus.ErrOutOfRange},
		{"REPLAY_BUFFER_SIZE", "-5", `=-5` + countRange, eventbus.ErrOutOfRange},
		{"REPLAY_BUFFER_SIZE", "2000000", `=2000000` + countRange, eventbus.ErrOutOfRange},
		{"REPLAY_BUFFER_SIZE", "1000001", `=1000001` + countRange, eventbus.ErrOutOfRange},
		{"REPLAY_BUFFER_SIZE", "99999999999999999999", `=99999999999999999999` + countRange, eventbus.ErrOutOfRange},
		{"REPLAY_BUFFER_SIZE", " 5", `=" 5"` + notInt, eventbus.ErrInvalid},
		{"REPLAY_BUFFER_SIZE", "1e3", `="1e3"` + notInt, eventbus.ErrInvalid},
		{"REPLAY_BUFFER_SIZE", "1_000", `="1_000"` + notInt, eventbus.ErrInvalid},
		{"NATS_RETENTION", "0", `=0: out of range [1, 1000]`, eventbus.ErrOutOfRange},
		{"CLOSED_RETENTION", "500ms", `=500ms: out of range [1s, 8760h]`, eventbus.ErrOutOfRange},
		{"CLOSED_RETENTION", "soon", `="soon": not a Go duration (for example 90s, 30m or 2h)`, eventbus.ErrInvalid},
		{"MAX_RETAINED", "0", `=0: out of range [1, 1000000]`, eventbus.ErrOutOfRange},
		{"NATS_RETENTION", "1001", `=1001: out of range [1, 1000]`, eventbus.ErrOutOfRange},
		{"NATS_RETENTION", "x", `="x"` + notInt, eventbus.ErrInvalid},
		{"NATS_MAX_AGE", "500ms", `=500ms: out of range 0 or [1s, 8760h]`, eventbus.ErrOutOfRange},
		{"REPLAY_MAX_AGE", "500ms", `=500ms: out of range 0 or [1s, 8760h]`, eventbus.ErrOutOfRange},
		{"REPLAY_MAX_AGE", "soon", `="soon"` + notDur, eventbus.ErrInvalid},
		{"PRESENCE_GRACE", "0", `=0: out of range [100ms, 1h]`, eventbus.ErrOutOfRange},
		{"PRESENCE_GRACE", "50ms", `=50ms: out of range [100ms, 1h]`, eventbus.ErrOutOfRange},
		{"PRESENCE_GRACE", "2h", `=2h: out of range [100ms, 1h]`, eventbus.ErrOutOfRange},
		{"PRESENCE_GRACE", "soon", `="soon"` + notDur, eventbus.ErrInvalid},
		{"CANCEL_HOLD", "500ms", `=500ms: out of range [1s, 1h]`, eventbus.ErrOutOfRange},
		{"CANCEL_HOLD", "-1s", `=-1s: out of range [1s, 1h]`, eventbus.ErrOutOfRange},
		{"TURN_LEASE", "10m", `=10m: out of range [1s, 5m]`, eventbus.ErrOutOfRange},
		{"TURN_LEASE", "1", `="1"` + notDur, eventbus.ErrInvalid},
		{"REPLAY_MAX_BYTES", "-1", `=-1: out of range 0 or [1B, 1GiB]`, eventbus.ErrOutOfRange},
		{"REPLAY_MAX_BYTES", "2GiB", `=2GiB: out of range 0 or [1B, 1GiB]`, eventbus.ErrOutOfRange},
		{"REPLAY_MAX_BYTES", "lots", `="lots"` + notSize, eventbus.ErrInvalid},
		{"NATS_MAX_AGE", "-1s", `=-1s: out of range 0 or [1s, 8760h]`, eventbus.ErrOutOfRange},
		{"NATS_MAX_AGE", "10000h", `=10000h: out of range 0 or [1s, 8760h]`, eventbus.ErrOutOfRange},
		{"NATS_REPLICAS", "0", `=0: out of range [1, 5]`, eventbus.ErrOutOfRange},
		{"NATS_REPLICAS", "6", `=6: out of range [1, 5]`, eventbus.ErrOutOfRange},
		{"NATS_REPLICAS", "three", `="three"` + notInt, eventbus.ErrInvalid},
		{"NATS_STORAGE", "disk", `="disk": unknown storage (want file or memory)`, eventbus.ErrInvalid},
		{"NATS_STORAGE", "File", `="File": unknown storage (want file or memory)`, eventbus.ErrInvalid},
		{"NATS_SYNC", "sometimes", `="sometimes": not "always" nor a Go duration (for example 1s or 100ms)`, eventbus.ErrInvalid},
		{"NATS_SYNC", "Always", `="Always": not "always" nor a Go duration (for example 1s or 100ms)`, eventbus.ErrInvalid},
		{"NATS_SYNC", "0s", `=0s: out of range: always or [1ms, 1h]`, eventbus.ErrOutOfRange},
		{"NATS_SYNC", "500us", `=500us: out of range: always or [1ms, 1h]`, eventbus.ErrOutOfRange},
		{"NATS_SYNC", "2h", `=2h: out of range: always or [1ms, 1h]`, eventbus.ErrOutOfRange},
		{"MAX_QUEUE_SIZE", "abc", `="abc"` + notInt, eventbus.ErrInvalid},
		{"MAX_QUEUE_SIZE", "0", `=0` + countRange, eventbus.ErrOutOfRange},
		{"MAX_QUEUE_SIZE", "-5", `=-5` + countRange, eventbus.ErrOutOfRange},
		{"MAX_QUEUE_SIZE", "2000000", `=2000000` + countRange, eventbus.ErrOutOfRange},
		{"MAX_SUBSCRIBERS", "abc", `="abc"` + notInt, eventbus.ErrInvalid},
		{"MAX_SUBSCRIBERS", "0", `=0` + countRange, eventbus.ErrOutOfRange},
		{"MAX_SUBSCRIBERS", "-5", `=-5` + countRange, eventbus.ErrOutOfRange},
		{"MAX_SUBSCRIBERS", "2000000", `=2000000` + countRange, eventbus.ErrOutOfRange},
		{"MAX_QUEUED_BYTES", "abc", `="abc"` + notSize, eventbus.ErrInvalid},
		{"MAX_QUEUED_BYTES", "0", `=0` + bytesRange, eventbus.ErrOutOfRange},
		{"MAX_QUEUED_BYTES", "-5", `=-5` + bytesRange, eventbus.ErrOutOfRange},
		{"MAX_QUEUED_BYTES", "2000000000", `=2000000000` + bytesRange, eventbus.ErrOutOfRange},
		{"MAX_QUEUED_BYTES", "2GiB", `=2GiB` + bytesRange, eventbus.ErrOutOfRange},
		{"MAX_QUEUED_BYTES", "1073741825", `=1073741825` + bytesRange, eventbus.ErrOutOfRange},
		{"MAX_QUEUED_BYTES", "0MiB", `=0MiB` + bytesRange, eventbus.ErrOutOfRange},
		{"MAX_QUEUED_BYTES", "-1KiB", `=-1KiB` + bytesRange, eventbus.ErrOutOfRange},
		{"MAX_QUEUED_BYTES", "9999999999TiB", `=9999999999TiB` + bytesRange, eventbus.ErrOutOfRange},
		{"MAX_QUEUED_BYTES", "1.5MiB", `="1.5MiB"` + notSize, eventbus.ErrInvalid},
		{"MAX_QUEUED_BYTES", "2 MiB", `="2 MiB"` + notSize, eventbus.ErrInvalid},
		{"MAX_QUEUED_BYTES", "2mib", `="2mib"` + notSize, eventbus.ErrInvalid},
		{"MAX_QUEUED_BYTES", "MiB", `="MiB"` + notSize, eventbus.ErrInvalid},
		{"REPLAY_BUDGET_BYTES", "abc", `="abc"` + notSize, eventbus.ErrInvalid},
		{"REPLAY_BUDGET_BYTES", "0", `=0` + bytesRange, eventbus.ErrOutOfRange},
		{"REPLAY_BUDGET_BYTES", "-5", `=-5` + bytesRange, eventbus.ErrOutOfRange},
		{"REPLAY_BUDGET_BYTES", "2000000000", `=2000000000` + bytesRange, eventbus.ErrOutOfRange},
		{"SESSION_TTL", "abc", `="abc"` + notDur, eventbus.ErrInvalid},
		{"SESSION_TTL", "30", `="30"` + notDur, eventbus.ErrInvalid},
		{"SESSION_TTL", "0", `=0` + ttlRange, eventbus.ErrOutOfRange},
		{"SESSION_TTL", "0s", `=0s` + ttlRange, eventbus.ErrOutOfRange},
		{"SESSION_TTL", "-5m", `=-5m` + ttlRange, eventbus.ErrOutOfRange},
		{"SESSION_TTL", "500ms", `=500ms` + ttlRange, eventbus.ErrOutOfRange},
		{"SESSION_TTL", "8761h", `=8761h` + ttlRange, eventbus.ErrOutOfRange},
		{"OVERFLOW_POLICY", "block", `="block": refused: block would stall every publisher behind one slow subscriber (want drop_subscriber, drop_oldest or drop_newest)`, eventbus.ErrInvalid},
		{"OVERFLOW_POLICY", "fifo", `="fifo": unknown overflow policy (want drop_subscriber, drop_oldest or drop_newest)`, eventbus.ErrInvalid},
		{"OVERFLOW_POLICY", "DROP_OLDEST", `="DROP_OLDEST": unknown overflow policy (want drop_subscriber, drop_oldest or drop_newest)`, eventbus.ErrInvalid},
		{"DROPPABLE_TYPES", "a b,c", `="a b,c": entry "a b" contains white space or a control character`, eventbus.ErrInvalid},
		{"DROPPABLE_TYPES", "ok,x\r\ny", `="ok,x\r\ny": entry "x\r\ny" contains white space or a control character`, eventbus.ErrInvalid},
		{"DROPPABLE_TYPES", "a\x00b", `="a\x00b": entry "a\x00b" contains white space or a control character`, eventbus.ErrInvalid},
		{"DISABLE_SLOW_CLIENT_WARNING", "yes", `="yes": not a boolean (want true or false)`, eventbus.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			if strings.ContainsRune(tt.value, 0) {
				// The process environment cannot hold NUL; use load.
				cfg, err := load([]string{Prefix + tt.key + "=" + tt.value}, eventbus.Options{}, false)
				require.Error(t, err)
				assert.EqualError(t, err, Prefix+tt.key+tt.want)
				assert.Zero(t, cfg)
				return
			}
			clearEnv(t)
			t.Setenv(Prefix+tt.key, tt.value)
			cfg, err := Load()
			require.Error(t, err)
			assert.EqualError(t, err, Prefix+tt.key+tt.want)
			assert.Zero(t, cfg, "a failed Load returns the zero Config")
			assert.ErrorIs(t, err, tt.wantErr)
			var ve *VarError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, Prefix+tt.key, ve.Var)
			assert.Equal(t, tt.value, ve.Value)
			if strings.HasPrefix(tt.key, "NATS_") {
				n, err := LoadNATS()
				assert.EqualError(t, err, Prefix+tt.key+tt.want, "LoadNATS says what Load says")
				assert.ErrorIs(t, err, tt.wantErr)
				assert.Zero(t, n)
			}
		})
	}
}

func TestLoadReportsEveryBadVariable(t *testing.T) {
	clearEnv(t)
	t.Setenv(Prefix+"REPLAY_BUFFER_SIZE", "abc")
	t.Setenv(Prefix+"MAX_QUEUE_SIZE", "0")
	t.Setenv(Prefix+"MAX_QUEUED_BYTES", "2GiB")
	t.Setenv(Prefix+"SESSION_TTL", "forever")
	t.Setenv(Prefix+"OVERFLOW_POLICY", "block")
	t.Setenv(Prefix+"MAX_SUBSCRIBERS", "8") // good, not reported
	t.Setenv(Prefix+"MAX_SUBSCRIBER", "8")  // unknown
	_, err := Load()
	require.Error(t, err)
	assert.Equal(t, []string{
		`AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE="abc": not an integer`,
		`AGENTPOOL_EVENTBUS_SESSION_TTL="forever": not a Go duration (for example 90s, 30m or 2h)`,
		`AGENTPOOL_EVENTBUS_MAX_QUEUE_SIZE=0: out of range [1, 1000000]`,
		`AGENTPOOL_EVENTBUS_MAX_QUEUED_BYTES=2GiB: out of range [1B, 1GiB]`,
		`AGENTPOOL_EVENTBUS_OVERFLOW_POLICY="block": refused: block would stall every publisher behind one slow subscriber (want drop_subscriber, drop_oldest or drop_newest)`,
		`AGENTPOOL_EVENTBUS_MAX_SUBSCRIBER="8": unknown variable (did you mean AGENTPOOL_EVENTBUS_MAX_SUBSCRIBERS?)`,
	}, errs(err))
	assert.ErrorIs(t, err, eventbus.ErrInvalid)
	assert.ErrorIs(t, err, eventbus.ErrOutOfRange)
	assert.ErrorIs(t, err, ErrUnknownVariable)
}

func TestLoadUnknownVariable(t *testing.T) {
	tests := []struct {
		key  string
		want string
	}{
		{"AGENTPOOL_EVENTBUS_REPLAY_BUFER_SIZE", `AGENTPOOL_EVENTBUS_REPLAY_BUFER_SIZE="200": unknown variable (did you mean AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE?)`},
		{"AGENTPOOL_EVENTBUS_replay_buffer_size", `AGENTPOOL_EVENTBUS_replay_buffer_size="200": unknown variable (did you mean AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE?)`},
		{"agentpool_eventbus_session_ttl", `agentpool_eventbus_session_ttl="200": unknown variable (did you mean AGENTPOOL_EVENTBUS_SESSION_TTL?)`},
		{"AGENTPOOL_EVENTBUS_SESION_TTL", `AGENTPOOL_EVENTBUS_SESION_TTL="200": unknown variable (did you mean AGENTPOOL_EVENTBUS_SESSION_TTL?)`},
		{"AGENTPOOL_EVENTBUS_MAX_QUEUED", `AGENTPOOL_EVENTBUS_MAX_QUEUED="200": unknown variable (did you mean AGENTPOOL_EVENTBUS_MAX_QUEUED_BYTES?)`},
		{"AGENTPOOL_EVENTBUS_HEARTBEAT", `AGENTPOOL_EVENTBUS_HEARTBEAT="200": unknown variable`},
		{"AGENTPOOL_EVENTBUS_", `AGENTPOOL_EVENTBUS_="200": unknown variable`},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(tt.key, "200")
			_, err := Load()
			assert.EqualError(t, err, tt.want)
			assert.ErrorIs(t, err, ErrUnknownVariable)
		})
	}
	t.Run("other prefixes are ignored", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("AGENTPOOL_EVENTBUSX", "1")
		t.Setenv("AGENTPOOL_OTHER", "1")
		_, err := Load()
		assert.NoError(t, err)
	})
}

func TestLoadWith(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		base    eventbus.Options
		want    func(*eventbus.Options) // edits to the defaults
		nats    NATS                    // what LoadNATS gives
		wantErr []string
	}{
		{
			name: "zero base reads the environment",
			env:  map[string]string{"REPLAY_BUFFER_SIZE": "200", "OVERFLOW_POLICY": "drop_oldest"},
			want: func(c *eventbus.Options) { c.ReplayBufferSize = 200; c.OverflowPolicy = eventbus.DropOldest },
		},
		{
			name: "NATS retention and max age from the environment; an explicit 0 age is none",
			env:  map[string]string{"NATS_RETENTION": "3", "NATS_MAX_AGE": "0"},
			want: func(*eventbus.Options) {},
			nats: NATS{Retention: 3},
		},
		{
			name: "NATS max age from the environment",
			env:  map[string]string{"NATS_MAX_AGE": "24h"},
			want: func(*eventbus.Options) {},
			nats: NATS{MaxAge: 24 * time.Hour},
		},
		{
			name: "NATS replicas, storage and sync always from the environment",
			env:  map[string]string{"NATS_REPLICAS": "3", "NATS_STORAGE": "memory", "NATS_SYNC": "always"},
			want: func(*eventbus.Options) {},
			nats: NATS{Replicas: 3, Storage: "memory", Sync: NATSSync{Always: true}},
		},
		{
			name: "NATS sync interval from the environment",
			env:  map[string]string{"NATS_STORAGE": "file", "NATS_SYNC": "250ms"},
			want: func(*eventbus.Options) {},
			nats: NATS{Storage: "file", Sync: NATSSync{Interval: 250 * time.Millisecond}},
		},
		{
			name: "non-zero base field wins over its variable",
			env:  map[string]string{"REPLAY_BUFFER_SIZE": "200", "MAX_QUEUE_SIZE": "50"},
			base: eventbus.Options{ReplayBufferSize: 10},
			want: func(c *eventbus.Options) { c.ReplayBufferSize = 10; c.MaxQueueSize = 50 },
		},
		{
			name: "base wins for every kind of field",
			env: map[string]string{
				"MAX_QUEUED_BYTES": "1MiB", "SESSION_TTL": "5m", "OVERFLOW_POLICY": "drop_oldest",
				"DROPPABLE_TYPES": "x", "REPLAY_BUDGET_BYTES": "1KiB", "MAX_SUBSCRIBERS": "3",
			},
			base: eventbus.Options{
				MaxQueuedBytes: 4096, SessionTTL: time.Minute, OverflowPolicy: eventbus.DropNewest,
				DroppableTypes: []string{"y"}, ReplayBudgetBytes: 2048, MaxSubscribers: 4,
			},
			want: func(c *eventbus.Options) {
				c.MaxQueuedBytes, c.SessionTTL, c.OverflowPolicy = 4096, time.Minute, eventbus.DropNewest
				c.DroppableTypes, c.ReplayBudgetBytes, c.MaxSubscribers = []string{"y"}, 2048, 4
			},
		},
		{
			name: "base true bool wins, env false cannot override",
			env:  map[string]string{"DISABLE_SLOW_CLIENT_WARNING": "false"},
			base: eventbus.Options{DisableSlowClientWarning: true},
			want: func(c *eventbus.Options) { c.DisableSlowClientWarning = true },
		},
		{
			name: "env true applies when base is false",
			env:  map[string]string{"DISABLE_SLOW_CLIENT_WARNING": "true"},
			want: func(c *eventbus.Options) { c.DisableSlowClientWarning = true },
		},
		{
			name: "empty DroppableTypes in base defers to env",
			env:  map[string]string{"DROPPABLE_TYPES": "a,b"},
			base: eventbus.Options{DroppableTypes: []string{}},
			want: func(c *eventbus.Options) { c.DroppableTypes = []string{"a", "b"} },
		},
		{
			name:    "bad variable is reported even when base overrides it",
			env:     map[string]string{"REPLAY_BUFFER_SIZE": "abc"},
			base:    eventbus.Options{ReplayBufferSize: 10},
			wantErr: []string{`AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE="abc": not an integer`},
		},
		{
			name:    "out-of-range variable is reported even when base overrides it",
			env:     map[string]string{"REPLAY_BUFFER_SIZE": "0"},
			base:    eventbus.Options{ReplayBufferSize: 10},
			wantErr: []string{`AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE=0: out of range [1, 1000000]`},
		},
		{
			name: "bad base fields name the Go field",
			env:  map[string]string{"MAX_QUEUE_SIZE": "0"},
			base: eventbus.Options{ReplayBufferSize: -1, SessionTTL: time.Millisecond, OverflowPolicy: "block"},
			wantErr: []string{
				`AGENTPOOL_EVENTBUS_MAX_QUEUE_SIZE=0: out of range [1, 1000000]`,
				`eventbus: ReplayBufferSize=-1: out of range [1, 1000000]`,
				`eventbus: SessionTTL=1ms: out of range [1s, 8760h]`,
				`eventbus: OverflowPolicy="block": refused: block would stall every publisher behind one slow subscriber (want drop_subscriber, drop_oldest or drop_newest)`,
			},
		},
		{
			name:    "unknown variable is reported with a base",
			env:     map[string]string{"REPLAY_BUFER_SIZE": "5"},
			base:    eventbus.Options{ReplayBufferSize: 10},
			wantErr: []string{`AGENTPOOL_EVENTBUS_REPLAY_BUFER_SIZE="5": unknown variable (did you mean AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE?)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(Prefix+k, v)
			}
			base := tt.base
			cfg, err := LoadWith(base)
			assert.Equal(t, tt.base, base, "base is not modified")
			if tt.wantErr != nil {
				assert.Equal(t, tt.wantErr, errs(err))
				assert.Zero(t, cfg)
				return
			}
			require.NoError(t, err)
			want := eventbus.Options{}.WithDefaults()
			tt.want(&want)
			assert.Equal(t, want, cfg)
			n, err := LoadNATS()
			require.NoError(t, err)
			assert.Equal(t, tt.nats, n)
		})
	}
}

// Issue 27.10: LoadWith lets the program's values beat the environment,
// so the Quick start's ReplayBufferSize: 100 silently ignored
// AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE. LoadWithDefaults takes the
// program's values as defaults that every variable set overrides.
func TestLoadWithDefaultsEnvironmentWins(t *testing.T) {
	defaults := eventbus.Options{ReplayBufferSize: 100, MaxQueueSize: 50, DisableSlowClientWarning: true,
		DroppableTypes: []string{"agent_message_chunk"}, ReplayCompact: coalesce.ACP, Epoch: "prog"}
	tests := []struct {
		name    string
		env     map[string]string
		want    func(*eventbus.Options) // edits to defaults.WithDefaults()
		wantErr []string
	}{
		{"no variable: the program's defaults", nil, func(*eventbus.Options) {}, nil},
		{"a variable beats the program's value",
			map[string]string{"REPLAY_BUFFER_SIZE": "500", "MAX_QUEUE_SIZE": "7"},
			func(c *eventbus.Options) { c.ReplayBufferSize, c.MaxQueueSize = 500, 7 }, nil},
		{"a bool variable set to false turns the program's true off",
			map[string]string{"DISABLE_SLOW_CLIENT_WARNING": "false"},
			func(c *eventbus.Options) { c.DisableSlowClientWarning = false }, nil},
		{"a list variable replaces the program's list",
			map[string]string{"DROPPABLE_TYPES": "a,b"},
			func(c *eventbus.Options) { c.DroppableTypes = []string{"a", "b"} }, nil},
		{"REPLAY_COMPACT=off turns the program's compaction off",
			map[string]string{"REPLAY_COMPACT": "off"},
			func(c *eventbus.Options) { c.ReplayCompact = nil }, nil},
		{"an empty variable is unset: the program's value",
			map[string]string{"REPLAY_BUFFER_SIZE": ""},
			func(*eventbus.Options) {}, nil},
		{"a bad variable is an error naming it",
			map[string]string{"REPLAY_BUFFER_SIZE": "0"},
			nil, []string{`AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE=0: out of range [1, 1000000]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(Prefix+k, v)
			}
			in := defaults
			cfg, err := LoadWithDefaults(in)
			if tt.wantErr != nil {
				assert.Equal(t, tt.wantErr, errs(err))
				assert.Zero(t, cfg)
				return
			}
			require.NoError(t, err)
			want := defaults.WithDefaults()
			tt.want(&want)
			assert.Equal(t, want.ReplayCompact == nil, cfg.ReplayCompact == nil, "ReplayCompact")
			want.ReplayCompact, cfg.ReplayCompact = nil, nil
			assert.Equal(t, want, cfg)
		})
	}
	t.Run("bad program defaults name the Go field", func(t *testing.T) {
		clearEnv(t)
		_, err := LoadWithDefaults(eventbus.Options{ReplayBufferSize: -1})
		assert.Equal(t, []string{`eventbus: ReplayBufferSize=-1: out of range [1, 1000000]`}, errs(err))
	})
}

// Issue 27.10: the byte-size error listed B, KB, MB, GB, KiB, MiB and GiB
// while kB, TB, TiB and a leading + were accepted too (docs/operations.md
// lists them). It lists every suffix the parser accepts.
func TestByteSizeErrorListsEverySuffix(t *testing.T) {
	t.Parallel()
	_, err := parseBytes("2 MiB")
	require.Error(t, err)
	for _, u := range byteUnits {
		assert.Regexp(t, ` `+u.suffix+`[,:]`, err.Error(), "names %s", u.suffix)
		v, err := parseBytes("+1" + u.suffix)
		require.NoError(t, err, "accepts %s", u.suffix)
		assert.Equal(t, u.mult, v)
	}
}

func TestEnvMap(t *testing.T) {
	t.Parallel()
	m := envMap([]string{"A=1", "A=2", "B=x=y", "NOEQUALS", "=C:=weird", "E="})
	assert.Equal(t, map[string]string{"A": "1", "B": "x=y", "E": ""}, m)
}

func TestParseBytesClamps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
	}{
		{"9223372036854775807", 1<<63 - 1},
		{"99999999999999999999", 1<<63 - 1},
		{"-99999999999999999999", -1 << 63},
		{"9000000000GiB", 1<<63 - 1},
		{"-9000000000GiB", -1 << 63},
		{"8589934591GiB", 8589934591 << 30},
	}
	for _, tt := range tests {
		v, err := parseBytes(tt.in)
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, v, tt.in)
	}
}

// FuzzLoad feeds arbitrary strings to REPLAY_BUFFER_SIZE and
// MAX_QUEUED_BYTES: load must never panic, and either succeed with both
// fields in range or fail with errors that name the value.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{"", "0", "1", "-5", "abc", "2000000", "1000000", "2MiB", "1GiB", "2GiB",
		"100KB", "1.5MiB", " 7", "+8", "99999999999999999999", "9999999999TiB", "B", "\x00", "\r\n", "é"} {
		f.Add(s, s)
		f.Add(s, "2MiB")
		f.Add("100", s)
	}
	f.Fuzz(func(t *testing.T, size, bytes string) {
		environ := []string{Prefix + "REPLAY_BUFFER_SIZE=" + size, Prefix + "MAX_QUEUED_BYTES=" + bytes}
		cfg, err := load(environ, eventbus.Options{}, false)
		if err == nil {
			if cfg.ReplayBufferSize < 1 || cfg.ReplayBufferSize > 1_000_000 {
				t.Fatalf("ReplayBufferSize %d accepted from %q", cfg.ReplayBufferSize, size)
			}
			if cfg.MaxQueuedBytes < 1 || cfg.MaxQueuedBytes > 1<<30 {
				t.Fatalf("MaxQueuedBytes %d accepted from %q", cfg.MaxQueuedBytes, bytes)
			}
			if size != "" {
				if n, aerr := strconv.Atoi(size); aerr != nil || n != cfg.ReplayBufferSize {
					t.Fatalf("ReplayBufferSize %d from %q", cfg.ReplayBufferSize, size)
				}
			}
			return
		}
		for _, msg := range errs(err) {
			var name, value string
			switch {
			case strings.HasPrefix(msg, Prefix+"REPLAY_BUFFER_SIZE="):
				name, value = "REPLAY_BUFFER_SIZE", size
			case strings.HasPrefix(msg, Prefix+"MAX_QUEUED_BYTES="):
				name, value = "MAX_QUEUED_BYTES", bytes
			default:
				t.Fatalf("error names neither variable: %s", msg)
			}
			rest := strings.TrimPrefix(msg, Prefix+name+"=")
			if !strings.HasPrefix(rest, value+": ") && !strings.HasPrefix(rest, strconv.Quote(value)+": ") {
				t.Fatalf("error does not show the value %q: %s", value, msg)
			}
		}
		var ve *VarError
		if !errors.As(err, &ve) {
			t.Fatalf("not a VarError: %v", err)
		}
	})
}

// Issue 18.11: AgentPool's replay_buffer_size=0 means "no replay"; ours
// never silently becomes the default 100 either: an explicit 0 is refused,
// naming the variable, whether or not a base sets the field.
func TestLoadReplayBufferSizeZeroIsRefused(t *testing.T) {
	clearEnv(t)
	t.Setenv(Prefix+"REPLAY_BUFFER_SIZE", "0")
	for _, base := range []eventbus.Options{{}, {ReplayBufferSize: 50}} {
		cfg, err := LoadWith(base)
		require.Error(t, err)
		assert.Zero(t, cfg)
		var ve *VarError
		require.ErrorAs(t, err, &ve)
		assert.Equal(t, "AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE", ve.Var)
		assert.ErrorIs(t, err, eventbus.ErrOutOfRange)
		assert.EqualError(t, err, "AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE=0: out of range [1, 1000000]")
	}
}

// AGENTPOOL_EVENTBUS_REPLAY_COMPACT names a rule set; a bad name is an
// error naming the variable and the value; a rule set in code wins.
func TestLoadReplayCompact(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  eventbus.Coalescer
	}{{"", nil}, {"off", nil}, {"acp", coalesce.ACP}, {"agentpool", coalesce.AgentPool}} {
		t.Run(tt.value, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(CompactVar, tt.value)
			cfg, err := Load()
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.ReplayCompact)
		})
	}
	clearEnv(t)
	t.Setenv(CompactVar, "ACP")
	_, err := Load()
	require.ErrorIs(t, err, eventbus.ErrInvalid)
	assert.Equal(t, `AGENTPOOL_EVENTBUS_REPLAY_COMPACT="ACP": unknown rule set (want off, acp or agentpool)`, err.Error())
	t.Setenv(CompactVar, "acp")
	cfg, err := LoadWith(eventbus.Options{ReplayCompact: coalesce.AgentPool})
	require.NoError(t, err)
	assert.Equal(t, coalesce.AgentPool, cfg.ReplayCompact, "code wins over the environment")
}

// FuzzNATSSyncText: every text NATSSync accepts is "always", "" or a
// duration in [1ms, 1h], and its MarshalText reads back as the same value.
func FuzzNATSSyncText(f *testing.F) {
	for _, s := range []string{"", "always", "Always", "1s", "100ms", "0s", "1h", "61m", "500us", "-1s", "1ms", "always ", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var s NATSSync
		if err := s.UnmarshalText([]byte(v)); err != nil {
			if !errors.Is(err, eventbus.ErrInvalid) && !errors.Is(err, eventbus.ErrOutOfRange) {
				t.Fatalf("%q: error %v matches neither ErrInvalid nor ErrOutOfRange", v, err)
			}
			return
		}
		if s.Always && s.Interval != 0 || !s.Always && s.Interval != 0 && (s.Interval < time.Millisecond || s.Interval > time.Hour) {
			t.Fatalf("%q accepted as %+v", v, s)
		}
		text, err := s.MarshalText()
		require.NoError(t, err)
		var back NATSSync
		require.NoError(t, back.UnmarshalText(text), "MarshalText of %q gave %q", v, text)
		require.Equal(t, s, back)
	})
}
