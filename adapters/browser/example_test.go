package browser_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/replaybus/replaybus/adapters/browser"
)

// The module beside the SSE endpoint: a page imports it from /replaybus.js.
func ExampleHandler() {
	mux := http.NewServeMux()
	mux.Handle(browser.Pattern, browser.Handler{})

	req := httptest.NewRequest(http.MethodGet, "/replaybus.js", nil)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Cache-Control"))

	// A browser that has it revalidates with its ETag.
	req.Header.Set("If-None-Match", rec.Header().Get("ETag"))
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	// Output:
	// 200 text/javascript; charset=utf-8 no-cache
	// 304
}
