package config

import (
	"errors"
	"os"
	"reflect"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/replaybus/replaybus/eventbus"
)

// NATS is the part of the configuration that only the bus over NATS
// JetStream (module adapters/nats) uses: the stream's retention, replicas
// and storage, and the sync policy of an embedded NATS server, read from
// the AGENTPOOL_EVENTBUS_NATS_* variables by [LoadNATS]. This package does
// not import adapters/nats (a heavy module); the program that builds the
// NATS bus passes the values on, as the example server does:
//
//	n, err := config.LoadNATS()
//	…
//	if n.Retention != 0 {
//		opts = append(opts, nats.WithRetention(n.Retention))
//	}
//	if n.Replicas != 0 {
//		opts = append(opts, nats.WithReplicas(n.Replicas))
//	}
//
// A zero field means "not set": adapters/nats (or the embedded server)
// then applies its default.
type NATS struct {
	// Retention is how many replay buffers' worth of events per session
	// the stream keeps (nats.WithRetention: MaxMsgsPerSubject = Retention ×
	// ReplayBufferSize). Range 1–1000; 0 (unset): adapters/nats's default,
	// 20. Env: AGENTPOOL_EVENTBUS_NATS_RETENTION.
	Retention int `env:"NATS_RETENTION"`
	// MaxAge is the stream's MaxAge (nats.WithMaxAge): events older than
	// this are deleted. Range 0 or 1s–8760h; 0 (the default): none set,
	// so the stream follows Options.ReplayMaxAge × the retention (nothing
	// when that is 0 too). Env: AGENTPOOL_EVENTBUS_NATS_MAX_AGE (a Go
	// duration such as "24h").
	MaxAge time.Duration `env:"NATS_MAX_AGE"`
	// Replicas is the stream's replication factor (nats.WithReplicas):
	// how many servers of a NATS cluster hold every event. Range 1–5; 0
	// (unset): adapters/nats's default, 1. Three replicas on a 3-server
	// cluster survive the loss of any one server. Env:
	// AGENTPOOL_EVENTBUS_NATS_REPLICAS.
	Replicas int `env:"NATS_REPLICAS"`
	// Storage is the stream's storage (nats.WithStorage): "file" or
	// "memory"; "" (unset): adapters/nats's default, file. Only file
	// storage keeps events across a restart of every server. Env:
	// AGENTPOOL_EVENTBUS_NATS_STORAGE.
	Storage string `env:"NATS_STORAGE"`
	// Sync is when an embedded NATS server (package
	// adapters/nats/embedded) writes JetStream's files through to disk;
	// the zero value is nats-server's default, every 2 minutes. An
	// external server's own configuration (jetstream.sync_interval)
	// decides for it. Env: AGENTPOOL_EVENTBUS_NATS_SYNC ("always" or a Go
	// duration, see [NATSSync]).
	Sync NATSSync `env:"NATS_SYNC"`
}

// NATSSync is JetStream's sync policy (nats-server's sync_interval): when
// the file store writes what it appended through to disk (fsync). With
// Always every write is synced before it is acknowledged; with an Interval
// the server syncs every Interval, so an acknowledged event may be only in
// the operating system's memory until then (docs/distributed.md, "What an
// acknowledgement means"). The zero value means nats-server's default, an
// interval of 2 minutes. Its text form, for variables and flags, is
// "always" or a Go duration from 1ms to 1h ("" for the default).
type NATSSync struct {
	// Always syncs every write before the ack (sync_interval: always).
	Always bool `env:"-"`
	// Interval is the time between syncs when Always is false; zero means
	// nats-server's default (2 minutes).
	Interval time.Duration `env:"-"`
	// (The env:"-" tags keep caarlos0/env from reading the fields as
	// variables of their own: the value comes whole from NATS_SYNC.)
}

// The range of a NATSSync interval.
const (
	minNATSSync = time.Millisecond
	maxNATSSync = time.Hour
)

// UnmarshalText parses "always", a Go duration in [1ms, 1h], or "" (the
// default). A bad value is an error matching [eventbus.ErrInvalid] (not
// "always" nor a duration) or [eventbus.ErrOutOfRange], naming the range.
func (s *NATSSync) UnmarshalText(b []byte) error {
	v := string(b)
	switch v {
	case "":
		*s = NATSSync{}
		return nil
	case "always":
		*s = NATSSync{Always: true}
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return invalid(`not "always" nor a Go duration (for example 1s or 100ms)`)
	}
	if d < minNATSSync || d > maxNATSSync {
		return &reason{kind: eventbus.ErrOutOfRange, msg: "out of range: always or [1ms, 1h]"}
	}
	*s = NATSSync{Interval: d}
	return nil
}

// MarshalText returns the text UnmarshalText reads: "always", the
// interval, or "" for the default.
func (s NATSSync) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// String returns "always", the interval as a Go duration, or "" for the
// default.
func (s NATSSync) String() string {
	switch {
	case s.Always:
		return "always"
	case s.Interval != 0:
		return s.Interval.String()
	}
	return ""
}

// The ranges of the NATS variables.
const (
	maxNATSRetention = 1000
	maxNATSAge       = 8760 * time.Hour
	maxNATSReplicas  = 5
)

var natsFields = fieldsOf(reflect.TypeFor[NATS]())

// LoadNATS reads [NATS] from the AGENTPOOL_EVENTBUS_NATS_* environment
// variables (RETENTION, MAX_AGE, REPLICAS, STORAGE, SYNC). An unset or empty
// variable leaves its field zero (the default); a set one is parsed and
// range-checked as given, so an explicit NATS_RETENTION "0" is an error.
// Every bad variable is reported at once, as by [Load] (which checks these
// variables too, so a bad one is never missed): an [errors.Join] of
// [*VarError] values matching [eventbus.ErrInvalid] or
// [eventbus.ErrOutOfRange]. On error the returned NATS is the zero value.
// It reads the process environment once and is safe for concurrent use.
func LoadNATS() (NATS, error) {
	n, errs := loadNATS(envMap(os.Environ()))
	if len(errs) > 0 {
		return NATS{}, errors.Join(errs...)
	}
	return n, nil
}

// loadNATS is LoadNATS over vars; it returns the values and every error.
func loadNATS(vars map[string]string) (NATS, []error) {
	var n NATS
	err := env.ParseWithOptions(&n, env.Options{Prefix: Prefix, Environment: vars, FuncMap: parsers})
	errs, failed := varErrors(err, vars)
	check := func(name string, bad bool, r string) {
		key := keyOf(name)
		if vars[key] != "" && !failed[name] && bad {
			errs = append(errs, &VarError{Var: key, Value: vars[key], Err: &reason{kind: eventbus.ErrOutOfRange, msg: "out of range " + r}})
		}
	}
	check("Retention", n.Retention < 1 || n.Retention > maxNATSRetention, "[1, 1000]")
	check("MaxAge", n.MaxAge != 0 && (n.MaxAge < time.Second || n.MaxAge > maxNATSAge), "0 or [1s, 8760h]")
	check("Replicas", n.Replicas < 1 || n.Replicas > maxNATSReplicas, "[1, 5]")
	if key := keyOf("Storage"); vars[key] != "" && n.Storage != "file" && n.Storage != "memory" {
		errs = append(errs, &VarError{Var: key, Value: vars[key], Err: invalid("unknown storage (want file or memory)")})
	}
	if len(errs) > 0 {
		return NATS{}, errs
	}
	return n, nil
}
