package main

import (
	"bufio"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunNATS: two agentservers share one bus over NATS: the first with
// -nats embedded, the second connected to it; an event posted to the first
// arrives on an SSE stream of the second.
func TestRunNATS(t *testing.T) {
	base1, logs1, stop1 := startRun(t, "-nats", "embedded", "-nats-dir", t.TempDir())
	defer stop1()
	url := regexp.MustCompile(`url=(nats://[0-9.:]+)`).FindStringSubmatch(logs1.String())
	require.Len(t, url, 2, "the embedded server's URL is logged:\n%s", logs1.String())
	base2, _, stop2 := startRun(t, "-nats", url[1])
	defer stop2()

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	resp, err := client.Post(base1+"/sessions", "application/json", strings.NewReader(`{"id":"shared"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	var stream *http.Response
	require.Eventually(t, func() bool {
		r, err := client.Get(base2 + "/session/shared/events")
		if err != nil {
			return false
		}
		if r.StatusCode != http.StatusOK {
			r.Body.Close()
			return false
		}
		stream = r
		return true
	}, 10*time.Second, 20*time.Millisecond, "node 2 learns the session")
	defer stream.Body.Close()

	resp, err = client.Post(base1+"/session/shared/events", "application/json", strings.NewReader(`{"type":"note","data":{"n":1}}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	br := bufio.NewReader(stream.Body)
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if strings.HasPrefix(line, "id: ") {
			break
		}
	}
	tr.CloseIdleConnections()
}

// TestRunNATSBadURL: a -nats value that is neither embedded nor a URL is a
// usage error.
func TestRunNATSBadURL(t *testing.T) {
	err := run(context.Background(), []string{"-nats", "localhost"}, &syncBuffer{}, nil)
	var ue usageError
	require.ErrorAs(t, err, &ue)
	assert.Contains(t, err.Error(), "-nats")
}
