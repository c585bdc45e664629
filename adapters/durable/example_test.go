package durable_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/eventbus"
)

// A JSON stream: create it, append a batch (flattened into two messages,
// two bus events), read it back from the beginning, then resume from the
// offset the first read returned.
func ExampleHandler() {
	bus, _ := eventbus.New(eventbus.Options{Epoch: "e1"})
	defer bus.Close()
	h, _ := durable.NewHandler(bus, durable.HandlerOptions{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	url := srv.URL + durable.Pattern + "chat"

	do := func(method, url, body string) *http.Response {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, _ := http.DefaultClient.Do(req)
		return resp
	}
	show := func(resp *http.Response) string {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s up-to-date=%t next=%s\n", resp.StatusCode, string(b),
			resp.Header.Get("Stream-Up-To-Date") == "true", resp.Header.Get("Stream-Next-Offset"))
		return resp.Header.Get("Stream-Next-Offset")
	}
	show(do(http.MethodPut, url, ""))
	show(do(http.MethodPost, url, `[{"role":"user","text":"hi"},{"role":"agent","text":"hello"}]`))
	next := show(do(http.MethodGet, url+"?offset=-1", ""))
	_, _ = bus.Publish("chat", "tool_call", map[string]string{"tool": "search"})
	show(do(http.MethodGet, url+"?offset="+next, ""))
	// Output:
	// 201  up-to-date=false next=e1_0000000000000000
	// 204  up-to-date=false next=e1_0000000000000002
	// 200 [{"role":"user","text":"hi"},{"role":"agent","text":"hello"}] up-to-date=true next=e1_0000000000000002
	// 200 [{"v":1,"id":3,"type":"tool_call","session":"chat","data":{"tool":"search"}}] up-to-date=true next=e1_0000000000000003
}
