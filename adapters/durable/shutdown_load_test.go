package durable_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/eventbus"
)

// Shutdown under load: with SSE readers, long-polls and appenders busy on
// a stream, Shutdown returns nil once every request has returned, every
// read has ended (none waits for its SSEDuration or long-poll timeout),
// and the handler refuses what comes after with 503 and Retry-After.
func TestShutdownUnderLoadEndsEveryRead(t *testing.T) {
	r := newRig(t, eventbus.Options{Epoch: "e1", ReplayBufferSize: 64}, durable.HandlerOptions{})
	resp, _ := r.do(t, http.MethodPut, "s", "", "Content-Type", "text/plain")
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	stop := make(chan struct{})
	var appenders sync.WaitGroup
	appended := make(chan struct{}, 1)
	for a := range 4 {
		appenders.Add(1)
		go func() {
			defer appenders.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodPost, r.url+"s", strings.NewReader(strconv.Itoa(a)+":"+strconv.Itoa(i)+" "))
				req.Header.Set("Content-Type", "text/plain")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				_ = res.Body.Close()
				select {
				case appended <- struct{}{}:
				default:
				}
			}
		}()
	}
	defer func() {
		close(stop)
		appenders.Wait()
	}()
	<-appended

	var readers sync.WaitGroup
	reads := make(chan int, 40) // the readers' statuses
	read := func(q string) {
		defer readers.Done()
		res, err := http.Get(r.url + "s?" + q)
		if err != nil {
			reads <- 0
			return
		}
		reads <- res.StatusCode
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
	}
	for range 20 {
		readers.Add(2)
		go read("offset=-1&live=sse")
		go read("offset=now&live=long-poll")
	}
	// Wait until the SSE answers have started (their headers are in).
	require.Eventually(t, func() bool { return r.h.Stats().SSE >= 20 }, 10*time.Second, 5*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, r.h.Shutdown(ctx), "every request returned")
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("a read outlived Shutdown")
	}
	close(reads)
	for code := range reads {
		assert.Contains(t, []int{http.StatusOK, http.StatusNoContent, http.StatusServiceUnavailable}, code)
	}
	res, body := r.do(t, http.MethodGet, "s?offset=-1", "")
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode, body)
	assert.Equal(t, "5", res.Header.Get("Retry-After"))
	assert.Zero(t, r.h.Stats().Active)
}
