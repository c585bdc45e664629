package eventbus

// Position is a cursor: the place in a bus's sequence a client has reached.
// ID is the id of the last event it received (0: none yet, so everything
// held is replayed); Epoch, when non-empty, is the [Bus.Epoch] that id came
// from, so that a cursor from another bus incarnation is detected (an
// epoch_reset frame, never a silent mix of two histories). A Position is
// what a client sends back as Last-Event-ID: adapters/sse parses
// "<id>" and "<epoch>-<id>" into one, and [SubscribeOptions.Cursor] takes
// one (nil: no cursor). It is a plain value, safe to copy and share.
type Position struct {
	// ID is the last event id received; 0 means nothing yet.
	ID uint64
	// Epoch is the bus epoch ID belongs to; "" trusts the cursor to be
	// from the current epoch (a plain Last-Event-ID's case).
	Epoch string
}

// At returns a pointer to Position{ID: id}, ready for
// [SubscribeOptions.Cursor]: opts.Cursor = eventbus.At(lastID).
func At(id uint64) *Position { return &Position{ID: id} }
