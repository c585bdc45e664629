// Package scope names which sessions a subscriber hears, and keeps the
// session tree that the names are resolved against.
//
// # Scopes
//
// A subscription is made on one session and has one [Kind]:
//
//   - [Session]: that session only (AgentPool's scope="session").
//   - [Descendants]: the session and every session below it, transitively,
//     including children created after the subscription started
//     (AgentPool's scope="descendants").
//   - [Subtree]: the session, its parent and its siblings — AgentPool's
//     meaning of scope="subtree", kept as it is for parity.
//   - [All]: every session of the bus.
//
// [Parse] accepts exactly these four names and nothing else.
//
// # The session tree
//
// [Tree] holds parent→children links between session ids, refuses cycles
// and unknown parents, and answers ancestor and descendant walks without
// recomputing anything per event: each node points at its parent and keeps
// its children, so a publish walks only its own ancestors.
//
// # Concurrency
//
// Kind is a plain value and safe to share. A Tree is not safe for concurrent
// use; the event bus guards it with its publish lock.
package scope
