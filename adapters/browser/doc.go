// Package browser serves replaybus.js, the browser client of the SSE
// stream (docs/browser.md): one ES module without dependencies that reads
// GET /session/{id}/events with fetch, resumes it exactly across cuts,
// reloads and server restarts, and shares one server connection among the
// tabs of an origin (a leader tab through Web Locks, the others fed over
// BroadcastChannel). It also posts cancels (the Stop button), keeps the
// sessions' presence and active turns, and reads many sessions on one
// connection (GET /events?session=a&session=b, sessions added and removed
// on the live stream).
//
// What is served is replaybus.min.js, the minified build of the readable
// replaybus.js beside it, generated with the esbuild pinned in build/
// (make browser-build; docs/browser.md, "The build").
//
// Mounting, beside the SSE handler:
//
//	mux.Handle(sse.Pattern, sseHandler)
//	mux.Handle(browser.Pattern, browser.Handler{}) // GET /replaybus.js
//
// and in the page:
//
//	<script type="module">
//	  import { connect } from '/replaybus.js';
//	  const rb = connect('/session/demo/events');
//	  rb.on('event', (ev) => console.log(ev.id, ev.type, ev.data));
//	</script>
//
// # Caching
//
// [Handler] answers with an ETag (a hash of the module's bytes) and
// Cache-Control: no-cache, so a browser revalidates on each load and gets a
// 304 until the server runs another version of the module. A client that
// accepts gzip gets the module compressed (computed once per process), under
// its own ETag; the answer says Vary: Accept-Encoding.
//
// # Concurrency
//
// The module's bytes are embedded and never change; [Handler] and [Script]
// are safe for concurrent use.
package browser
