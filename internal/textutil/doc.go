// Package textutil holds the small text helpers that every answer of the
// project words the same way: [Quote] cuts and quotes a bad value for an
// error message, [PublicMessage] drops Go package prefixes from an error's
// text, and [Distance] tells a misspelt name from an unknown one (the SSE
// and WebSocket query rules, the config loader, the example server);
// [CheckHeader] names a configured header no HTTP client can send (the SSE
// and WebSocket clients); [InvalidUTF8At] names where a body stops being
// UTF-8 (the example server, the Durable Streams handler, the bus's JSON check). Pure functions, safe for concurrent use.
package textutil
