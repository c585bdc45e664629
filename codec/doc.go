// Package codec maps bus events to a protocol-neutral model of a turn's
// parts — text, reasoning, tool input (start, delta, whole), tool output
// and error, plan, custom data, start and finish — from which the
// protocol encoders (adapters/aisdk, adapters/agui, adapters/a2a) write
// the AI SDK UI-message stream, AG-UI and A2A.
//
//	parts := codec.Default.Decode(nil, ev) // ev: an eventbus.Event
//
// # Decoders
//
// [ACP] reads the Agent Client Protocol's session/update shapes (package
// acp), [AgentPool] AgentPool's (package agentpool), [Turns] the turn
// lifecycle (turn_start, turn_end). A [Set] tries its decoders in order;
// an application registers its own by putting it first:
//
//	set := codec.New(myDecoder, codec.Turns, codec.ACP, codec.AgentPool)
//
// An event no decoder knows — another type, a known type in another
// shape, a byte payload, a frame of the bus — becomes one [Data] part
// named after its type: the protocols' custom events carry it, and nothing
// is silently dropped.
//
// # Compacted records
//
// A compacting bus (eventbus.Options.ReplayCompact) and a coalescing
// subscription hand a run of text chunks out as one event: the first
// event's payload with the merged text, the last event's id, Count and
// FirstID. It decodes like any event, into one Text part holding the
// merged text with the last id, so a projection's resume built from the
// compacted log is "the reply so far" in one part, then live parts.
//
// # Split surrogate pairs
//
// A producer writing JSON from UTF-16 strings may split a character
// between two text chunks ("\ud83d", then "\ude00"). The ACP decoder keeps
// each half in Part.Text, and [TextJoin] (which the encoders use) makes
// the pair one character; coalescing and compaction join the chunks'
// JSON before unescaping it, so a merged chunk holds the character.
//
// docs/frontends.md has the table from bus events to each protocol's
// events. Decoding allocates only the parts and what a payload's parse
// needs; every decoder and Set here is safe for concurrent use.
package codec
