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
// JetStream (module adapters/nats) uses: the stream's retention, read from
// two AGENTPOOL_EVENTBUS_NATS_* variables by [LoadNATS]. This package does
// not import adapters/nats (a heavy module); the program that builds the
// NATS bus passes the values on, as the example server does:
//
//	n, err := config.LoadNATS()
//	…
//	if n.Retention != 0 {
//		opts = append(opts, nats.WithRetention(n.Retention))
//	}
//	if n.MaxAge != 0 {
//		opts = append(opts, nats.WithMaxAge(n.MaxAge))
//	}
//
// A zero field means "not set": adapters/nats then applies its default.
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
}

// The ranges of the NATS variables.
const (
	maxNATSRetention = 1000
	maxNATSAge       = 8760 * time.Hour
)

var natsFields = fieldsOf(reflect.TypeFor[NATS]())

// LoadNATS reads [NATS] from the AGENTPOOL_EVENTBUS_NATS_RETENTION and
// AGENTPOOL_EVENTBUS_NATS_MAX_AGE environment variables. An unset or empty
// variable leaves its field zero (the default); a set one is parsed and
// range-checked as given, so an explicit NATS_RETENTION "0" is an error.
// Every bad variable is reported at once, as by [Load] (which checks these
// two variables too, so a bad one is never missed): an [errors.Join] of
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
	if len(errs) > 0 {
		return NATS{}, errs
	}
	return n, nil
}
