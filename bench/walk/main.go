package main

import (
	"bufio"
	"context"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/coverage"
	"strings"
	"time"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

func main() {
	bus, err := eventbus.New(eventbus.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer bus.Close()
	h, err := sse.NewHandler(bus, sse.HandlerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(sse.Pattern, h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	if err := bus.CreateSession("s", ""); err != nil {
		log.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(context.Background(), "GET", srv.URL+"/session/s/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	readFrame := func(want string) {
		var b strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				log.Fatal(err)
			}
			b.WriteString(line)
			if line == "\n" && strings.Contains(b.String(), want) {
				return
			}
		}
	}
	readFrame("retry")
	time.Sleep(300 * time.Millisecond) // the writer parks
	if err := coverage.ClearCounters(); err != nil {
		log.Fatal(err)
	}
	if _, err := bus.Publish("s", "agent_message_chunk", map[string]string{"text": "hi"}); err != nil {
		log.Fatal(err)
	}
	readFrame("agent_message_chunk")
	dir := os.Getenv("WALKDIR")
	if err := coverage.WriteMetaDir(dir); err != nil {
		log.Fatal(err)
	}
	if err := coverage.WriteCountersDir(dir); err != nil {
		log.Fatal(err)
	}
}
