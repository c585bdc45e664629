package durable

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
)

// webhookClient is the client that delivers webhooks. checkWebhookURL
// checks a URL as written; this checks where a delivery really goes, so
// that neither a host name that resolves to a private address nor a
// redirect reaches the server's own network (PROTOCOL.md §12.8):
//   - every connection is refused whose address is private, link-local,
//     unspecified or multicast, or loopback unless the delivery's URL is
//     plain http to localhost (the one local target checkWebhookURL
//     allows);
//   - redirects are not followed: a 3xx is a failed delivery, retried.
func webhookClient() *http.Client {
	d := &net.Dialer{Timeout: webhookTimeout}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // a proxy would dial for us, past the check
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dd := *d
		local, _ := ctx.Value(localTarget{}).(bool)
		dd.Control = func(_, address string, _ syscall.RawConn) error { return checkDial(address, local) }
		return dd.DialContext(ctx, network, addr)
	}
	return &http.Client{Timeout: webhookTimeout, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return errWebhookRedirect }}
}

// localTarget is the context key that marks a delivery to plain http
// localhost, whose connections may reach loopback addresses.
type localTarget struct{}

var errWebhookRedirect = errors.New("durable: webhook deliveries do not follow redirects")

// checkDial refuses a connection to address (host:port, an IP) that a
// webhook must not reach.
func checkDial(address string, local bool) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("durable: webhook dial to %s: %w", quote(address), err)
	}
	ip := ap.Addr().Unmap()
	if ip.IsLoopback() && local {
		return nil
	}
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
		return fmt.Errorf("durable: webhook dial to %s refused: a local or private address", quote(address))
	}
	return nil
}

// webhookContext marks ctx for a delivery to target: plain http (which
// checkWebhookURL allows to localhost only) may dial loopback.
func webhookContext(ctx context.Context, req *http.Request) context.Context {
	return context.WithValue(ctx, localTarget{}, req.URL.Scheme == "http")
}
