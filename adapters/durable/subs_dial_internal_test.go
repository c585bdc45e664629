package durable

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingListener counts the connections made to a loopback port.
func countingListener(t *testing.T) (port int, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port, accepted
}

// loopbackName returns a name other than localhost that /etc/hosts maps to
// a loopback address (the machine's own name, usually), skipping without
// one: no DNS is asked.
func loopbackName(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Skip("no /etc/hosts")
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[0], "127.") {
			continue
		}
		for _, n := range f[1:] {
			if n != "localhost" && !strings.HasPrefix(n, "#") {
				return n
			}
		}
	}
	t.Skip("/etc/hosts maps no name but localhost to loopback")
	return ""
}

// TestWebhookDeliveriesReachNoLocalAddress: checkWebhookURL checks a URL as
// written, so https://<a name /etc/hosts maps to 127.0.0.1>:<port>/ passed
// it and the delivery connected to the server's own loopback, as would a
// host name that resolves to a private address; and the client followed a
// receiver's redirect anywhere (to a cloud metadata address, say). A
// delivery now refuses to dial a local or private address (loopback only
// for plain http to localhost, the one local target allowed) and follows
// no redirect.
func TestWebhookDeliveriesReachNoLocalAddress(t *testing.T) {
	c := webhookClient()
	post := func(url string) error {
		req, err := http.NewRequest(http.MethodPost, url, nil)
		require.NoError(t, err)
		req = req.WithContext(webhookContext(context.Background(), req))
		resp, err := c.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}

	t.Run("a name that resolves to loopback", func(t *testing.T) {
		name := loopbackName(t)
		port, accepted := countingListener(t)
		url := "https://" + name + ":" + strconv.Itoa(port) + "/hook"
		require.NoError(t, checkWebhookURL(url), "the URL as written passes")
		assert.Error(t, post(url))
		assert.Zero(t, accepted.Load(), "no connection reached the loopback port")
	})
	t.Run("a redirect", func(t *testing.T) {
		port, accepted := countingListener(t)
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://127.0.0.1:"+strconv.Itoa(port)+"/latest/meta-data", http.StatusFound)
		}))
		defer rcv.Close()
		require.NoError(t, checkWebhookURL(rcv.URL))
		assert.Error(t, post(rcv.URL))
		assert.Zero(t, accepted.Load(), "the redirect was not followed")
	})
	t.Run("plain http to localhost", func(t *testing.T) {
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		defer rcv.Close()
		assert.NoError(t, post(rcv.URL), "the local receiver PROTOCOL.md's tests use")
	})
	for addr, ok := range map[string]bool{
		"93.184.216.34:443": true, "[2606:4700::1]:443": true,
		"127.0.0.1:443": false, "[::1]:443": false, "10.1.2.3:443": false, "192.168.0.1:80": false,
		"169.254.169.254:80": false, "[::ffff:10.0.0.1]:443": false, "[fe80::1]:443": false,
		"[fd00::1]:443": false, "0.0.0.0:443": false, "224.0.0.1:443": false,
	} {
		if ok {
			assert.NoError(t, checkDial(addr, false), addr)
		} else {
			assert.Error(t, checkDial(addr, false), addr)
		}
	}
}
