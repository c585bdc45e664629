package embedded

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerConfig configures [RunServer]. The zero value runs a JetStream
// server on a free loopback port with its data in a new folder under
// os.TempDir().
type ServerConfig struct {
	// Dir is the JetStream data folder. Empty means a new folder under
	// os.TempDir() that [Server.Shutdown] removes; a folder given here is
	// kept, so a server started again on it finds its streams.
	Dir string
	// Host to listen on; empty means 127.0.0.1 (loopback only).
	Host string
	// Port to listen on; 0 means a free port.
	Port int
	// Name is the server name, unique in a cluster and kept across
	// restarts (JetStream knows its peers by it); empty means
	// "replaybus-<port>", or "replaybus-<host name>-<cluster port>" in a
	// cluster.
	Name string
	// ClusterName, ClusterPort and Routes join the server to a cluster
	// (see [RunCluster]): ClusterPort is where it listens for routes (on
	// Host), 0 meaning no cluster; Routes are the other servers' route
	// URLs (nats-route://host:port); ClusterName empty means "replaybus".
	ClusterName string
	ClusterPort int
	Routes      []string
	// SyncAlways makes JetStream write every change of its files through
	// to disk (fsync) before it acknowledges it, nats-server's
	// sync_interval "always": an acknowledged event then survives a power
	// loss of the servers that stored it, at a cost measured in
	// docs/distributed.md. False: the files are synced every SyncInterval.
	SyncAlways bool
	// SyncInterval is how often JetStream syncs its files to disk when
	// SyncAlways is false; zero means nats-server's default, 2 minutes.
	// Until a sync, an acknowledged event is in the operating system's
	// page cache: it survives the server process's crash, not a power
	// loss or a kernel crash of its machine.
	SyncInterval time.Duration
	// ReadyTimeout bounds the start; zero means 10 s.
	ReadyTimeout time.Duration
}

// Server is an in-process nats-server with JetStream, for the embedded
// mode of examples/agentserver and for tests. Its methods are safe for
// concurrent use.
type Server struct {
	cfg    ServerConfig
	ownDir bool
	srv    *server.Server
}

// RunServer starts an in-process NATS server with JetStream on the loopback
// interface and waits until it accepts connections. Errors: the data folder
// cannot be made, the options are refused, or the server is not ready in
// time.
func RunServer(cfg ServerConfig) (*Server, error) {
	s := &Server{cfg: cfg}
	if s.cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "replaybus-nats-*")
		if err != nil {
			return nil, fmt.Errorf("embedded: data folder: %w", err)
		}
		s.cfg.Dir, s.ownDir = dir, true
	}
	if s.cfg.Host == "" {
		s.cfg.Host = "127.0.0.1"
	}
	if s.cfg.Port == 0 {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		s.cfg.Port = p
	}
	if s.cfg.SyncInterval < 0 {
		return nil, fmt.Errorf("embedded: SyncInterval %v is negative", s.cfg.SyncInterval)
	}
	if s.cfg.Name == "" && s.cfg.ClusterPort != 0 {
		// Unique across machines that all use the default ports.
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("embedded: server name: %w", err)
		}
		s.cfg.Name = fmt.Sprintf("replaybus-%s-%d", host, s.cfg.ClusterPort)
	}
	if s.cfg.Name == "" {
		s.cfg.Name = fmt.Sprintf("replaybus-%d", s.cfg.Port)
	}
	if s.cfg.ClusterPort != 0 && s.cfg.ClusterName == "" {
		s.cfg.ClusterName = "replaybus"
	}
	if s.cfg.ReadyTimeout == 0 {
		s.cfg.ReadyTimeout = 10 * time.Second
	}
	if err := s.start(); err != nil {
		if s.ownDir {
			_ = os.RemoveAll(s.cfg.Dir)
		}
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	opts := &server.Options{
		ServerName: s.cfg.Name,
		Host:       s.cfg.Host,
		Port:       s.cfg.Port,
		JetStream:  true,
		StoreDir:   s.cfg.Dir,
		NoSigs:     true,
		NoLog:      true,
		SyncAlways: s.cfg.SyncAlways,
		// Zero is nats-server's default; it fills it in only when the
		// field is zero and no sync was configured.
		SyncInterval: s.cfg.SyncInterval,
	}
	if s.cfg.ClusterPort != 0 {
		opts.Cluster = server.ClusterOpts{Name: s.cfg.ClusterName, Host: s.cfg.Host, Port: s.cfg.ClusterPort}
		for _, r := range s.cfg.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return fmt.Errorf("embedded: route %q: %w", r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("embedded: nats-server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(s.cfg.ReadyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("embedded: nats-server on %s:%d not ready after %v", s.cfg.Host, s.cfg.Port, s.cfg.ReadyTimeout)
	}
	s.srv = srv
	return nil
}

// ClientURL returns the nats:// URL clients connect to.
func (s *Server) ClientURL() string { return fmt.Sprintf("nats://%s:%d", s.cfg.Host, s.cfg.Port) }

// RouteURL returns the nats-route:// URL other servers of its cluster list
// in their Routes, or "" when the server is in no cluster.
func (s *Server) RouteURL() string {
	if s.cfg.ClusterPort == 0 {
		return ""
	}
	return fmt.Sprintf("nats-route://%s:%d", s.cfg.Host, s.cfg.ClusterPort)
}

// Name returns the server's name.
func (s *Server) Name() string { return s.cfg.Name }

// Dir returns the JetStream data folder.
func (s *Server) Dir() string { return s.cfg.Dir }

// Stop shuts the server down and waits for it, keeping its data folder,
// so that [Server.Restart] can bring it back. Idempotent.
func (s *Server) Stop() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// Restart stops the server (if running) and starts it again on the same
// port and data folder; with file storage its streams come back.
func (s *Server) Restart() error {
	s.Stop()
	return s.start()
}

// Shutdown stops the server and removes the data folder if RunServer made
// it. Idempotent.
func (s *Server) Shutdown() {
	s.Stop()
	if s.ownDir {
		_ = os.RemoveAll(s.cfg.Dir)
	}
}

// Cluster is a NATS cluster of in-process servers on loopback ports, for
// tests of the distributed bus.
type Cluster struct {
	// Servers are the cluster's servers, in route order.
	Servers []*Server
	dir     string // removed by Shutdown when RunCluster made it
}

// ClusterConfig configures [StartCluster].
type ClusterConfig struct {
	// Servers is the number of servers, at least 1.
	Servers int
	// Dir holds the servers' data folders; empty means a new folder under
	// os.TempDir() that [Cluster.Shutdown] removes.
	Dir string
	// SyncAlways and SyncInterval are every server's sync policy (see
	// [ServerConfig]).
	SyncAlways   bool
	SyncInterval time.Duration
}

// RunCluster is [StartCluster] of n servers with their data folders under
// dir and nats-server's default sync policy.
func RunCluster(n int, dir string) (*Cluster, error) {
	return StartCluster(ClusterConfig{Servers: n, Dir: dir})
}

// StartCluster starts cfg.Servers JetStream servers routed to each other as
// one cluster on loopback ports, and waits until JetStream has a meta
// leader that sees all of them as current peers (up to 20 s). Errors: a
// bad config, a server that does not start, or no such leader in time.
func StartCluster(cfg ClusterConfig) (*Cluster, error) {
	n, dir := cfg.Servers, cfg.Dir
	if n < 1 {
		return nil, fmt.Errorf("embedded: cluster of %d servers", n)
	}
	own := dir == ""
	if own {
		d, err := os.MkdirTemp("", "replaybus-cluster-*")
		if err != nil {
			return nil, err
		}
		dir = d
	}
	ports := make([]int, 2*n)
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			if own {
				_ = os.RemoveAll(dir)
			}
			return nil, err
		}
		ports[i] = p
	}
	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+i])
	}
	c := &Cluster{}
	if own {
		c.dir = dir
	}
	for i := range n {
		s, err := RunServer(ServerConfig{
			Dir: fmt.Sprintf("%s/s%d", dir, i), Port: ports[i], Name: fmt.Sprintf("s%d", i),
			ClusterName: "replaybus", ClusterPort: ports[n+i], Routes: routes,
			SyncAlways: cfg.SyncAlways, SyncInterval: cfg.SyncInterval,
		})
		if err != nil {
			c.Shutdown()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range c.Servers {
			// Placement of a stream with n replicas needs every peer
			// online with current stats, not only a meta leader.
			if s.srv != nil && s.srv.JetStreamIsLeader() && len(s.srv.JetStreamClusterPeers()) >= n {
				return c, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.Shutdown()
	return nil, errors.New("embedded: cluster has no JetStream meta leader with every peer current after 20s")
}

// ClientURLs returns the servers' URLs, comma-separated, as
// nats.Connect takes them.
func (c *Cluster) ClientURLs() string {
	urls := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		urls[i] = s.ClientURL()
	}
	return strings.Join(urls, ",")
}

// Shutdown stops every server and removes the data folders it made.
func (c *Cluster) Shutdown() {
	for _, s := range c.Servers {
		s.Shutdown()
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("embedded: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
