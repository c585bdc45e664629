package ws_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/testkit"
)

// BenchmarkW8Loopback is the W8 workload of docs/benchmarks.md for both
// transports side by side: one session, S clients in this process connected
// over loopback TCP to the real handler on an http.Server, one publisher
// publishing 256-byte JSON events flat out, each client reading and parsing
// every frame (SSE: the line protocol with a bufio reader; WebSocket: one
// text message per frame through coder/websocket's Reader, into a reused
// buffer). Lossless limits (MaxQueued 1,000,000, 1 GiB) so that every event
// reaches every client. Each iteration publishes 200,000/S events and waits
// until all S clients have parsed all of them.
//
// Reported: ns/delivery (wall time ÷ events × S) and cpu-ns/delivery (the
// process's user+system CPU time ÷ deliveries — server and clients alike,
// since both run in this process). Run:
//
//	go test -run '^$' -bench W8Loopback -benchtime 5x ./adapters/ws/
func BenchmarkW8Loopback(b *testing.B) {
	for _, S := range []int{100, 1000} {
		for _, transport := range []string{"sse", "ws"} {
			b.Run(fmt.Sprintf("S=%d/%s", S, transport), func(b *testing.B) { benchW8(b, transport, S) })
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchW8(b *testing.B, transport string, S int) {
	bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 100, MaxSubscribers: S + 1})
	if err != nil {
		b.Fatal(err)
	}
	defer bus.Close()
	if err := bus.CreateSession("w8", ""); err != nil {
		b.Fatal(err)
	}
	lossless := func(_ *http.Request, o *eventbus.SubscribeOptions) { o.MaxQueued, o.MaxQueuedBytes = 1_000_000, 1<<30 }
	mux := http.NewServeMux()
	var closeHandler func()
	switch transport {
	case "sse":
		h, err := sse.NewHandler(bus, sse.HandlerOptions{Configure: lossless})
		if err != nil {
			b.Fatal(err)
		}
		mux.Handle(sse.Pattern, h)
		closeHandler = func() { _ = h.Close() }
	case "ws":
		h, err := ws.NewHandler(bus, ws.HandlerOptions{Configure: lossless, ResumeWait: -1})
		if err != nil {
			b.Fatal(err)
		}
		mux.Handle(ws.Pattern, h)
		closeHandler = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = h.Shutdown(ctx)
		}
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer closeHandler()

	var delivered atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); wg.Wait() }()
	errs := make(chan error, S)
	for range S {
		switch transport {
		case "sse":
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- readSSE(conn, &delivered)
			}()
			context.AfterFunc(ctx, func() { _ = conn.Close() })
		case "ws":
			c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/session/w8/ws?replay=0", nil)
			if err != nil {
				b.Fatal(err)
			}
			c.SetReadLimit(1 << 20)
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- readWS(ctx, c, &delivered)
			}()
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for testkit.SubscriberCounts(bus)["w8"] < S {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d clients subscribed", testkit.SubscriberCounts(bus)["w8"], S)
		}
		time.Sleep(time.Millisecond)
	}
	payload := []byte(`{"sessionId":"w8","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` +
		strings.Repeat("x", 256-95) + `"}}}`)
	events := 200_000 / S
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	var want int64
	for range b.N {
		for range events {
			if _, err := bus.Publish("w8", "agent_message_chunk", jsonRaw(payload)); err != nil {
				b.Fatal(err)
			}
		}
		want += int64(events * S)
		for delivered.Load() < want {
			select {
			case err := <-errs:
				b.Fatalf("client ended: %v", err)
			default:
			}
			if time.Now().After(start.Add(time.Duration(b.N) * 5 * time.Minute)) {
				b.Fatalf("stuck at %d of %d deliveries", delivered.Load(), want)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	n := float64(want)
	b.ReportMetric(float64(elapsed.Nanoseconds())/n, "ns/delivery")
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/delivery")
	b.ReportMetric(0, "ns/op")
}

func jsonRaw(b []byte) any { return rawJSON(b) }

type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

// readSSE reads one SSE stream, counting frames with an id: line.
func readSSE(conn net.Conn, delivered *atomic.Int64) error {
	if _, err := io.WriteString(conn, "GET /session/w8/events?replay=0 HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n\r\n"); err != nil {
		return err
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	body := bufio.NewReaderSize(resp.Body, 64<<10)
	hasID := false
	for {
		line, err := body.ReadSlice('\n')
		if err != nil {
			return err
		}
		switch {
		case len(line) == 1:
			if hasID {
				delivered.Add(1)
			}
			hasID = false
		case bytes.HasPrefix(line, []byte("id: ")):
			hasID = true
		}
	}
}

// readWS reads one WebSocket, counting frames with an id.
func readWS(ctx context.Context, c *websocket.Conn, delivered *atomic.Int64) error {
	defer c.CloseNow()
	// Background for the reads (a cancellable context costs the library a
	// timer per message); ctx's end closes the connection instead.
	stop := context.AfterFunc(ctx, func() { _ = c.CloseNow() })
	defer stop()
	buf := make([]byte, 0, 4096)
	idField := []byte(`{"v":1,"id":`)
	for {
		_, r, err := c.Reader(context.Background())
		if err != nil {
			return err
		}
		buf = buf[:0]
		for {
			if len(buf) == cap(buf) {
				buf = append(buf, 0)[:len(buf)]
			}
			n, err := r.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		if bytes.HasPrefix(buf, idField) {
			delivered.Add(1)
		}
	}
}
