// Package backoff computes the jittered wait before a reconnect, shared by
// the SSE client (adapters/sse) and the WebSocket client (adapters/ws) so
// that both follow one rule: the base delay doubled per consecutive
// failure up to a ceiling, jittered in [d/2, d]; a server's Retry-After is
// a floor with the jitter above it, never clamped to it (clamping sent
// every client back at the same instant). Safe for concurrent use: it
// keeps no state.
package backoff
