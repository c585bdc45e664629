// Package config fills an [eventbus.Options] from the AGENTPOOL_EVENTBUS_*
// environment variables with caarlos0/env. It is a leaf: the bus owns its
// options (each field's doc says what zero means) and never imports this
// package, so a program that configures the bus in code does not link env.
//
// The variable names follow AgentPool's setting names
// (AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE mirrors its manifest's
// eventbus_replay_buffer_size; AgentPool reads no such variable itself); the
// other limits come from
// qwen-code's event bus and OpenClaw's broadcaster.
//
// # Variables
//
//	variable                                        default          range
//	AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE           100              1–1,000,000 events per session
//	AGENTPOOL_EVENTBUS_MAX_QUEUE_SIZE               1000             1–1,000,000 frames per subscriber
//	AGENTPOOL_EVENTBUS_MAX_QUEUED_BYTES             2MiB             1B–1GiB per subscriber
//	AGENTPOOL_EVENTBUS_MAX_SUBSCRIBERS              64               1–1,000,000 per session
//	AGENTPOOL_EVENTBUS_SESSION_TTL                  1h               1s–8760h (Go duration)
//	AGENTPOOL_EVENTBUS_OVERFLOW_POLICY              (unset)          drop_subscriber | drop_oldest | drop_newest
//	AGENTPOOL_EVENTBUS_DROPPABLE_TYPES              (none)           comma-separated event types
//	AGENTPOOL_EVENTBUS_REPLAY_BUDGET_BYTES          8MiB             1B–1GiB per subscribe
//	AGENTPOOL_EVENTBUS_DISABLE_SLOW_CLIENT_WARNING  false            true | false
//	AGENTPOOL_EVENTBUS_NATS_RETENTION               20               1–1000 replay buffers per session (NATS only: [NATS], LoadNATS)
//	AGENTPOOL_EVENTBUS_NATS_MAX_AGE                 0 (none)         0 or 1s–8760h (Go duration, NATS only: [NATS], LoadNATS)
//	AGENTPOOL_EVENTBUS_NATS_REPLICAS                1                1–5 servers holding each event (NATS only)
//	AGENTPOOL_EVENTBUS_NATS_STORAGE                 file             file | memory (NATS only)
//	AGENTPOOL_EVENTBUS_NATS_SYNC                    (server's: 2m)   always | 1ms–1h (embedded NATS server only: [NATSSync])
//	AGENTPOOL_EVENTBUS_CLOSED_RETENTION             10m              1s–8760h a closed sub-agent's buffer stays readable
//	AGENTPOOL_EVENTBUS_MAX_RETAINED                 1000             1–1,000,000 closed sessions' buffers kept
//	AGENTPOOL_EVENTBUS_REPLAY_MAX_BYTES             0 (none)         0 or 1B–1GiB of event data per session's replay buffer
//	AGENTPOOL_EVENTBUS_REPLAY_MAX_AGE               0 (none)         0 or 1s–8760h an event stays in the replay buffer (Go duration)
//	AGENTPOOL_EVENTBUS_REPLAY_COMPACT               off              off | acp | agentpool (rule set folding a session's stored deltas)
//	AGENTPOOL_EVENTBUS_PRESENCE_GRACE               15s              100ms–1h a client's reconnect within it is no leave and join
//	AGENTPOOL_EVENTBUS_CANCEL_HOLD                  30s              1s–1h a cancel of a turn not yet started is held
//	AGENTPOOL_EVENTBUS_TURN_LEASE                   5s               1s–5m lease on a node's turns and presence (over NATS)
//
// Byte sizes are an integer number of bytes or an integer with a unit:
// B, kB or KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of
// 1024), with no space, as in 512KiB, optionally with a leading +. Durations use [time.ParseDuration] syntax (90s,
// 30m, 2h). Booleans use [strconv.ParseBool] syntax.
//
// # Validation
//
// A variable that is unset or empty takes its default. A variable that is
// set is taken at its word: "0", "-5" or "2000000" for the replay buffer
// size are errors naming the variable, not the default (nor, for the
// replay buffer, "no replay"), even though a zero field in a programmatic
// eventbus.Options means the default. [Load] reports every problem at
// once, joined with [errors.Join]; each is a [*VarError] that names the
// variable and its value:
//
//	AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE="abc": not an integer
//	AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE=0: out of range [1, 1000000]
//	AGENTPOOL_EVENTBUS_OVERFLOW_POLICY="block": refused: block would stall every publisher behind one slow subscriber (want drop_subscriber, drop_oldest or drop_newest)
//	AGENTPOOL_EVENTBUS_REPLAY_BUFER_SIZE="200": unknown variable (did you mean AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE?)
//
// Every AGENTPOOL_EVENTBUS_* variable belongs to this package, so one it
// does not know (compared case-insensitively on the prefix) is an error
// rather than silently ignored.
//
// eventbus.Options.Validate checks a programmatic Options against the same
// ranges and reports [*eventbus.OptionError] values that name the Go field
// instead:
//
//	eventbus: MaxQueueSize=-5: out of range [1, 1000000]
//
// # The NATS variables
//
// The AGENTPOOL_EVENTBUS_NATS_* variables configure the JetStream stream
// of the bus over NATS (module adapters/nats) and an embedded NATS server,
// not the bus itself: [LoadNATS] reads them into a [NATS] value whose
// fields the program passes to nats.WithRetention, nats.WithMaxAge,
// nats.WithReplicas, nats.WithStorage and the embedded server's
// configuration (this package does not import adapters/nats, a heavy
// module). [Load] checks them too, so a bad one is reported either way.
//
// # Embedding
//
// A program that embeds the bus may build an eventbus.Options itself (New
// validates it), call [LoadWith] so that the fields it sets win over the
// environment and the rest stay configurable by operators, or call
// [LoadWithDefaults] so that its values are defaults that every variable
// set overrides.
//
// # Concurrency
//
// eventbus.Options is a plain value. [Load], [LoadWith] and [LoadWithDefaults] read a snapshot of the
// process environment and share no state; all functions are safe for
// concurrent use.
package config
