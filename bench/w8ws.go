package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/centrifugal/centrifuge"
	"github.com/coder/websocket"

	rbws "github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// W8 over WebSocket ("W8ws"): the loopback run of W8 (runLoopback) with
// each system's own WebSocket handler and S github.com/coder/websocket
// clients, one per connection, that read every message into a reused buffer
// and parse every frame in it. A delivery is counted when its frame is
// parsed; the clients are the same code for both systems, so their CPU is in
// both figures.
//
//   - replaybus: adapters/ws.NewHandler (?replay=0, default options but the
//     lossless queue limits through HandlerOptions.Configure: MaxQueued
//     1,000,000, 1 GiB). The client's first message is {"resume":{}} (the
//     documented way to start at once instead of after the 1 s resume
//     wait); the stream then opens with stream_start. The client offers the
//     batched form (subprotocol rbws.SubprotocolBatch, required): each text
//     message is a JSON array of the envelopes of one batch (up to 64 or
//     64 KiB), split with rbws.SplitBatch; each envelope is {"v":1,"id":…,
//     "epoch":…,"type":…,"session":…,"data":…}; the epoch must be the one
//     the handshake announced (X-Event-Epoch) and the session the one
//     subscribed to.
//   - centrifuge: centrifuge.NewWebsocketHandler with its defaults (JSON
//     protocol; the client writer's default batching of up to 16 pushes
//     per message, newline-separated) but the write timeout, 10 s as
//     replaybus's instead of 1 s, and a server-side subscription
//     (OnConnecting's ConnectReply.Subscriptions, as the SSE rig), lossless
//     through Config.ClientQueueMaxSize. The client's first message is the
//     connect command {"id":1,"connect":{}}; it answers the server's
//     application pings ({}) with {} as centrifuge's SDKs do. The offset
//     and channel are read out of each push.
type wsRig struct {
	inst       Instance
	handler    http.Handler
	path       string   // the URL path and query, session included
	hello      []byte   // the client's first message
	protocols  []string // the subprotocols the client offers
	centrifuge bool     // newline-separated centrifuge pushes; else replaybus batches of envelopes
}

// w8Session is the session (channel) runLoopback publishes to.
const w8Session = "w8"

// wsPlain (-ws-plain): replaybus's clients take one message per frame,
// without the batched subprotocol.
var wsPlain bool

var wsSystems = map[string]func() (*wsRig, error){
	"replaybus": func() (*wsRig, error) {
		inst, err := openReplaybus(Opts{Ring: 100})
		if err != nil {
			return nil, err
		}
		rb := inst.(*rbInstance)
		h, err := rbws.NewHandler(rb.bus, rbws.HandlerOptions{
			SessionID: func(r *http.Request) string { return r.URL.Query().Get("s") },
			Configure: func(_ *http.Request, o *eventbus.SubscribeOptions) {
				o.MaxQueued, o.MaxQueuedBytes = 1_000_000, 1<<30
			},
		})
		if err != nil {
			inst.Close()
			return nil, err
		}
		rig := &wsRig{inst: wsInstance{inst, h.Close}, handler: h,
			path:      "/ws?replay=0&s=" + url.QueryEscape(w8Session),
			hello:     []byte(`{"resume":{}}`),
			protocols: []string{rbws.SubprotocolBatch}}
		if wsPlain {
			rig.protocols = nil
		}
		return rig, nil
	},
	"centrifuge": func() (*wsRig, error) {
		inst, err := openCentrifuge(Opts{Ring: 100, Lossless: true})
		if err != nil {
			return nil, err
		}
		c := inst.(*cfInstance)
		// WriteTimeout as replaybus's default (ws.DefaultWriteTimeout,
		// 10 s): centrifuge's own 1 s cut a client off, losing its events,
		// when a busy machine left it unscheduled that long.
		h := centrifuge.NewWebsocketHandler(c.node, centrifuge.WebsocketConfig{WriteTimeout: rbws.DefaultWriteTimeout})
		wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := context.WithValue(r.Context(), cfChannelKey{}, r.URL.Query().Get("s"))
			h.ServeHTTP(w, r.WithContext(ctx))
		})
		return &wsRig{inst: inst, handler: wrapped, centrifuge: true,
			path:  "/connection/websocket?s=" + url.QueryEscape(w8Session),
			hello: []byte(`{"id":1,"connect":{}}`)}, nil
	},
}

// wsInstance closes the replaybus WebSocket handler before the bus: its
// connections are hijacked, so http.Server.Close does not end them.
type wsInstance struct {
	Instance
	closeHandler func() error
}

func (w wsInstance) Close() {
	_ = w.closeHandler()
	w.Instance.Close()
}

// runW8WS measures one system's WebSocket handler at S clients with N
// events.
func runW8WS(name string, S, N int) (w1Result, error) {
	rig, err := wsSystems[name]()
	if err != nil {
		return w1Result{}, err
	}
	return runLoopback(name, S, N, rig.inst, rig.handler, func(addr string, k *Sink) (loopClient, error) {
		ctx, cancel := context.WithCancel(context.Background())
		c, resp, err := websocket.Dial(ctx, "ws://"+addr+rig.path, &websocket.DialOptions{Subprotocols: rig.protocols})
		if err != nil {
			cancel()
			return loopClient{}, err
		}
		if len(rig.protocols) > 0 && c.Subprotocol() != rig.protocols[0] {
			cancel()
			_ = c.CloseNow()
			return loopClient{}, fmt.Errorf("subprotocol %q not selected (got %q)", rig.protocols[0], c.Subprotocol())
		}
		c.SetReadLimit(16 << 20)
		return loopClient{
			run:  func() error { return wsClient(ctx, c, resp.Header.Get("X-Event-Epoch"), rig, k) },
			stop: func() { cancel(); _ = c.CloseNow() },
		}, nil
	})
}

// wsClient sends the rig's first message, then reads and parses every
// message until the connection ends, feeding k; it returns why.
func wsClient(ctx context.Context, c *websocket.Conn, epoch string, rig *wsRig, k *Sink) error {
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, rig.hello); err != nil {
		return err
	}
	p := wsParser{k: k,
		wantSess:  []byte(`","session":"` + k.sess + `"`),
		wantChan:  []byte(`{"push":{"channel":"` + k.sess + `"`),
		wantEpoch: []byte(`,"epoch":"` + epoch + `"`),
	}
	buf := make([]byte, 0, 64<<10)
	var elems [][]byte
	for {
		// No cancelable context on reads: coder/websocket arms a
		// context.AfterFunc per frame read for one (two allocations); the
		// run ends a client with CloseNow instead.
		typ, r, err := c.Reader(context.Background())
		if err != nil {
			return err
		}
		if typ != websocket.MessageText {
			return fmt.Errorf("a %v message", typ)
		}
		if buf, err = readAll(r, buf[:0]); err != nil {
			return err
		}
		if !rig.centrifuge && len(rig.protocols) == 0 { // one envelope per message
			if err := p.envelope(buf); err != nil {
				return err
			}
			continue
		}
		if !rig.centrifuge {
			if elems, err = rbws.SplitBatch(buf, elems[:0]); err != nil {
				return err
			}
			for _, e := range elems {
				if err := p.envelope(e); err != nil {
					return err
				}
			}
			continue
		}
		for msg := buf; len(msg) > 0; {
			line := msg
			if i := bytes.IndexByte(msg, '\n'); i >= 0 {
				line, msg = msg[:i], msg[i+1:]
			} else {
				msg = nil
			}
			pong, err := p.push(line)
			if err != nil {
				return err
			}
			if pong {
				if err := c.Write(context.Background(), websocket.MessageText, []byte("{}")); err != nil {
					return err
				}
			}
		}
	}
}

// readAll appends what r holds to buf, growing it as needed.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// wsParser parses the frames of one W8ws client into its sink.
type wsParser struct {
	k                             *Sink
	wantSess, wantChan, wantEpoch []byte
}

var (
	wsEventPrefix = []byte(`{"v":1,"id":`)
	wsIDField     = []byte(`"id":`)
	wsTypeField   = []byte(`,"type":"`)
	wsDataField   = []byte(`"data":`)
	wsResyncType  = []byte(`"type":"` + frame.TypeStateResyncRequired + `"`)
	cfPushPrefix  = []byte(`{"push":`)
	cfReplyPrefix = []byte(`{"id":`)
	cfErrorField  = []byte(`"error":`)
)

// envelope parses one replaybus frame: its id (only real events have one),
// its epoch, session and type, all before "data". The envelope's members
// come in the documented order ({"v":1,"id":…,"epoch":…,"type":…,
// "session":…, …}), so a real event is read in one forward pass; anything
// else (a synthetic frame) is searched member by member.
func (p *wsParser) envelope(b []byte) error {
	if rest, ok := bytes.CutPrefix(b, wsEventPrefix); ok {
		var n uint64
		i := 0
		for ; i < len(rest) && rest[i] >= '0' && rest[i] <= '9'; i++ {
			n = n*10 + uint64(rest[i]-'0')
		}
		if i == 0 {
			return fmt.Errorf("id without a number: %.80q", b)
		}
		rest = rest[i:]
		if rest, ok = bytes.CutPrefix(rest, p.wantEpoch); !ok {
			return fmt.Errorf("frame not of the epoch the handshake announced (%s): %.80q", p.wantEpoch, b)
		}
		// ,"type":"<type>" then ,"session":"<session>"
		rest, ok = bytes.CutPrefix(rest, wsTypeField)
		j := bytes.IndexByte(rest, '"')
		if !ok || j < 0 {
			return fmt.Errorf("no type: %.80q", b)
		}
		if !bytes.HasPrefix(rest[j:], p.wantSess) {
			p.k.foreign++
			return nil
		}
		p.k.Event(n)
		return nil
	}
	head := b
	if i := bytes.Index(b, wsDataField); i >= 0 {
		head = b[:i]
	}
	if bytes.Contains(head, wsIDField) {
		return fmt.Errorf("an event whose members are not in the documented order: %.80q", b)
	}
	if !bytes.Contains(head, []byte(`"type":"`)) {
		return fmt.Errorf("not an envelope: %.80q", b)
	}
	if bytes.Contains(head, wsResyncType) {
		p.k.Gap()
	}
	return nil // a synthetic frame: stream_start, replay_complete, …
}

// push parses one centrifuge reply or push; pong says the line was a ping
// to answer.
func (p *wsParser) push(line []byte) (pong bool, err error) {
	switch {
	case len(line) == 0:
		return false, nil
	case bytes.Equal(line, []byte("{}")):
		return true, nil
	case bytes.HasPrefix(line, cfReplyPrefix):
		if bytes.Contains(line, cfErrorField) {
			return false, fmt.Errorf("centrifuge refused: %.200s", line)
		}
		return false, nil
	case !bytes.HasPrefix(line, cfPushPrefix):
		return false, fmt.Errorf("not a centrifuge push: %.80q", line)
	}
	// {"push":{"channel":"w8","pub":{"data":{…},"offset":N}}}: the
	// offset is the pub's last member, so it is searched from the end.
	i := bytes.LastIndex(line, cfOffsetKey)
	if i < 0 {
		return false, nil // a push without a publication (join, leave…)
	}
	if !bytes.HasPrefix(line, p.wantChan) {
		p.k.foreign++
		return false, nil
	}
	var off uint64
	for i += len(cfOffsetKey); i < len(line) && line[i] >= '0' && line[i] <= '9'; i++ {
		off = off*10 + uint64(line[i]-'0')
	}
	p.k.Event(off)
	return false, nil
}
