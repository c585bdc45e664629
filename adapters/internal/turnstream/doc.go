// Package turnstream is what the frontend protocol handlers (adapters/aisdk,
// adapters/agui, adapters/a2a) share: reading one turn of a session from a
// subscription ([Reader]), finding the turn a cursor falls in ([Locate]),
// parsing the frame ids of package evframe ([ParseCursor]), priming an
// encoder with the turn so far to continue after a cursor ([Resume]),
// and writing a stream's frames with a flush and a write bound ([Writer]).
// Internal: users meet it only through those handlers.
package turnstream
