// Package serve is the handler side that the SSE and WebSocket handlers
// share: [Registry] keeps a handler's open streams for Close and Shutdown,
// [Admit] runs the checks every subscribe request passes before anything
// is subscribed (method, session id, the resume package's request parsing,
// a transport's own check, the overflow policy's default, Authorize,
// Configure), and [DurationOr] reads the options' "zero means the
// default, negative means none" durations. Internal: users meet it only
// through sse.Handler and ws.Handler.
package serve
