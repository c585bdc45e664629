// Package framecache is the cache through which every stream of one SSE or
// WebSocket handler shares one encoding of each event ([Cache]): a
// published event reaches S subscribers as S Event values that share their
// Data bytes, and without it each stream would build the same frame S
// times. Centrifuge and go-sse encode once per publish too. Internal: the
// adapters/sse and adapters/ws handlers use it.
package framecache
