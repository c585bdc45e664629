package main

// Opts configure one instance of a system for one run.
type Opts struct {
	Ring     int  // replay buffer (history) size per session
	Lossless bool // per-subscriber queues large enough that nothing may be dropped
}

// SubOpts configure one subscriber.
type SubOpts struct {
	Replay bool   // replay the history after Cursor before live events
	Cursor uint64 // with Replay: the last id the client has (ids are per system, see Instance)
	Stall  bool   // never consume: the subscriber's reader is stuck
}

// System is one contender: replaybus, a peer, or the naive baseline.
type System struct {
	Name string
	Open func(o Opts) (Instance, error)
	// OptIn keeps the system out of a run that names no systems: it runs
	// only when -systems asks for it.
	OptIn bool
}

// Instance is one running system. Ids are the system's own: replaybus's
// bus-wide sequence from 1, go-sse's per-Joe auto ids + 1, centrifuge's
// per-channel offsets from 1, the naive baseline's per-session sequence from
// 1. Within one session of one publisher they are contiguous for every system.
type Instance interface {
	// Publish publishes data (JSON) to session and returns its id.
	Publish(session string, data []byte) (uint64, error)
	// Publisher resolves session once and returns a function that
	// publishes to it as Publish does. Workloads resolve every session
	// before the timed phase, so a peer's own bookkeeping (the harness's
	// map from session to Joe or channel) stays off its hot path; replaybus
	// looks the session up itself on every publish, as its API does.
	Publisher(session string) (func(data []byte) (uint64, error), error)
	// Subscribe adds a subscriber to session whose events go to k.
	Subscribe(session string, so SubOpts, k *Sink) error
	// Sync returns once the given subscribers (by session) are registered,
	// so that the next Publish reaches them. Systems whose Subscribe
	// registers synchronously do nothing; go-sse publishes probes.
	Sync(sinks map[string][]*Sink) error
	// LastID is the id of the newest event published to session (0 if none).
	LastID(session string) uint64
	// Close stops the system; afterwards no Sink method is called any more.
	Close()
}

var systems = []System{
	{Name: "replaybus", Open: openReplaybus},
	{Name: "replaybus-next", Open: openReplaybusNext, OptIn: true},
	{Name: "go-sse", Open: openGoSSE},
	{Name: "centrifuge", Open: openCentrifuge},
	{Name: "naive", Open: openNaive},
	{Name: "chan", Open: openChan},
}
