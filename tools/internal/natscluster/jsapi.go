package natscluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Admin asks the cluster's JetStream API through one connection per
// server (each pinned to its server, reconnecting to it forever), so that a
// request can go to a server that is up and not isolated. Safe for
// concurrent use.
type Admin struct {
	c     *Cluster
	mu    sync.Mutex
	conns map[int]*nats.Conn
}

// NewAdmin returns an Admin of c; connections are made on first use.
func (c *Cluster) NewAdmin() *Admin { return &Admin{c: c, conns: map[int]*nats.Conn{}} }

// Close closes the Admin's connections.
func (a *Admin) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, nc := range a.conns {
		nc.Close()
	}
	a.conns = map[int]*nats.Conn{}
}

func (a *Admin) conn(s *Server) (*nats.Conn, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if nc := a.conns[s.Index]; nc != nil {
		return nc, nil
	}
	nc, err := nats.Connect(s.URL(), nats.Name("natscluster admin "+s.Name), nats.DontRandomize(),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.Timeout(time.Second),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		return nil, err
	}
	a.conns[s.Index] = nc
	return nc, nil
}

// StreamInfo asks for the stream's info (its cluster part names the
// leader and the replicas' state) through the servers in turn, skipping
// the ones in skip (an isolated server answers from its own stale view),
// each bounded by 1 s.
func (a *Admin) StreamInfo(ctx context.Context, stream string, skip ...int) (*jetstream.StreamInfo, error) {
	var last error = errNoServer
	for _, s := range a.c.Servers {
		if !s.Running() || slices.Contains(skip, s.Index) {
			continue
		}
		nc, err := a.conn(s)
		if err != nil || !nc.IsConnected() {
			continue
		}
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := js.Stream(rctx, stream)
		if err == nil {
			var info *jetstream.StreamInfo
			info, err = st.Info(rctx)
			if err == nil {
				cancel()
				return info, nil
			}
		}
		cancel()
		last = fmt.Errorf("via %s: %w", s.Name, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

// Leader returns the server that leads the stream now, as the JetStream
// API reports it (the stream info's cluster leader), or an error when the
// stream has no leader (an election) or no server answered.
func (a *Admin) Leader(ctx context.Context, stream string, skip ...int) (*Server, error) {
	info, err := a.StreamInfo(ctx, stream, skip...)
	if err != nil {
		return nil, err
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return nil, fmt.Errorf("natscluster: stream %q has no leader", stream)
	}
	s := a.c.ByName(info.Cluster.Leader)
	if s == nil {
		return nil, fmt.Errorf("natscluster: stream %q led by unknown server %q", stream, info.Cluster.Leader)
	}
	return s, nil
}

// StepDown asks the stream's leader to step down
// ($JS.API.STREAM.LEADER.STEPDOWN), through any server that is up, and
// returns once the request succeeded.
func (a *Admin) StepDown(ctx context.Context, stream string) error {
	var last error = errNoServer
	for _, s := range a.c.Servers {
		if !s.Running() {
			continue
		}
		nc, err := a.conn(s)
		if err != nil || !nc.IsConnected() {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		m, err := nc.RequestWithContext(rctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil)
		cancel()
		if err != nil {
			last = fmt.Errorf("via %s: %w", s.Name, err)
			continue
		}
		var r struct {
			Success bool `json:"success"`
			Error   *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return fmt.Errorf("natscluster: step-down answer %q: %w", m.Data, err)
		}
		if r.Error != nil {
			return fmt.Errorf("natscluster: step-down of %q: %s", stream, r.Error.Description)
		}
		if !r.Success {
			return fmt.Errorf("natscluster: step-down of %q not done: %s", stream, m.Data)
		}
		return nil
	}
	return last
}

// WaitStreamHealthy waits until the stream has a leader and every other
// replica is current and online (all peers of a 3-server cluster caught up),
// and every running server's /healthz answers 200, or ctx ends.
func (a *Admin) WaitStreamHealthy(ctx context.Context, stream string, replicas int) error {
	var why string
	for {
		info, err := a.StreamInfo(ctx, stream)
		switch {
		case err != nil:
			why = err.Error()
		case info.Cluster == nil || info.Cluster.Leader == "":
			why = "no leader"
		case len(info.Cluster.Replicas) != replicas-1:
			why = fmt.Sprintf("%d replicas besides the leader", len(info.Cluster.Replicas))
		default:
			why = ""
			for _, r := range info.Cluster.Replicas {
				if !r.Current || r.Offline {
					why = fmt.Sprintf("replica %s current=%v offline=%v lag=%d", r.Name, r.Current, r.Offline, r.Lag)
				}
			}
		}
		if why == "" {
			ok := true
			for _, s := range a.c.Servers {
				hctx, cancel := context.WithTimeout(ctx, time.Second)
				err := s.WaitHealthy(hctx)
				cancel()
				if err != nil {
					ok, why = false, err.Error()
					break
				}
			}
			if ok {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("natscluster: stream %q not healthy: %s: %w", stream, why, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
