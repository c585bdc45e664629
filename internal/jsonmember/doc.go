// Package jsonmember finds what encoding/json takes silently in an
// object: a member given twice (the last wins) or named in another case
// than the one its struct reads (it is folded onto that name). One scanner
// for every route that refuses such a body: the frontend routes
// (turnstream.ReadBody), the many-sessions change body (resume) and the
// many-sessions WebSocket's messages (ws).
package jsonmember
