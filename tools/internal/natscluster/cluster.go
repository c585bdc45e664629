package natscluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build compiles the nats-server command of the module version this module
// requires into dir and returns the binary's path. It runs go build in the
// directory of this module (found from the working directory: the harnesses
// run inside the repository).
func Build(ctx context.Context, dir string) (string, error) {
	return GoBuild(ctx, dir, "nats-server", "github.com/nats-io/nats-server/v2")
}

// GoBuild runs go build -o dir/name pkg with the working directory of the
// process, and returns the binary's path; extra flags (-race) go before
// pkg.
func GoBuild(ctx context.Context, dir, name, pkg string, flags ...string) (string, error) {
	out := filepath.Join(dir, name)
	args := append([]string{"build", "-o", out}, flags...)
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// Config describes a cluster for [Start].
type Config struct {
	// Bin is the nats-server binary ([Build]).
	Bin string
	// Dir holds every server's configuration, log and JetStream folder.
	Dir string
	// Size is the number of servers; zero means 3.
	Size int
	// Sync is the servers' JetStream sync_interval: "" for nats-server's
	// default (2 minutes), "always", or a Go duration.
	Sync string
}

// Cluster is a running NATS cluster of child processes. Its methods are
// safe for concurrent use.
type Cluster struct {
	cfg     Config
	http    *http.Client // for the monitoring endpoints
	Servers []*Server
	links   map[[2]int]*Link // route relays: [i][j] carries server i's dial of server j
}

// Server is one nats-server child process of a [Cluster].
type Server struct {
	Index      int
	Name       string // server_name: n0, n1, …
	ClientPort int
	HTTPPort   int // monitoring
	routePort  int
	bin        string
	http       *http.Client
	conf       string
	log        string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the process exited
}

// Start writes every server's configuration and starts them, then waits
// until every one answers its monitoring endpoint's /healthz with 200
// (JetStream enabled and current) or ctx ends. The ports are free ones,
// which another process may take before a server listens on them: a
// server that exits at start makes Start try again on new ports, three
// times in all.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	var err error
	for range 3 {
		var c *Cluster
		if c, err = start(ctx, cfg); err == nil || ctx.Err() != nil || !errors.Is(err, errExited) {
			return c, err
		}
		for i := range max(cfg.Size, 3) { // a new cluster, not the failed one's state
			_ = os.RemoveAll(filepath.Join(cfg.Dir, fmt.Sprintf("n%d", i)))
		}
	}
	return nil, err
}

// errExited: a server's process exited while it was awaited.
var errExited = errors.New("natscluster: server exited")

func start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Size == 0 {
		cfg.Size = 3
	}
	c := &Cluster{cfg: cfg, links: map[[2]int]*Link{}, http: &http.Client{Transport: &http.Transport{}, Timeout: 2 * time.Second}}
	for i := range cfg.Size {
		s := &Server{Index: i, Name: fmt.Sprintf("n%d", i), bin: cfg.Bin, http: c.http}
		var err error
		if s.ClientPort, err = freePort(); err == nil {
			if s.HTTPPort, err = freePort(); err == nil {
				s.routePort, err = freePort()
			}
		}
		if err != nil {
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	for i, a := range c.Servers {
		for j, b := range c.Servers {
			if i == j {
				continue
			}
			l, err := NewLink(fmt.Sprintf("127.0.0.1:%d", b.routePort))
			if err != nil {
				c.Close()
				return nil, err
			}
			c.links[[2]int{a.Index, b.Index}] = l
		}
	}
	for _, s := range c.Servers {
		if err := c.writeConfig(s); err != nil {
			c.Close()
			return nil, err
		}
		if err := s.Start(); err != nil {
			c.Close()
			return nil, err
		}
	}
	for _, s := range c.Servers {
		if err := s.WaitHealthy(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) writeConfig(s *Server) error {
	var routes []string
	for _, o := range c.Servers {
		if o != s {
			routes = append(routes, fmt.Sprintf("%q", "nats-route://"+c.links[[2]int{s.Index, o.Index}].Addr()))
		}
	}
	sync := ""
	if c.cfg.Sync != "" {
		sync = fmt.Sprintf("\n  sync_interval: %q", c.cfg.Sync)
	}
	store := filepath.Join(c.cfg.Dir, s.Name)
	s.conf = filepath.Join(c.cfg.Dir, s.Name+".conf")
	s.log = filepath.Join(c.cfg.Dir, s.Name+".log")
	// advertise: a route address that refuses connections (127.0.0.2xx
	// port 1 on loopback), so that a server told about another by gossip
	// cannot dial it past the relays: only the configured routes, all
	// through a Link, connect.
	conf := fmt.Sprintf(`server_name: %q
listen: "127.0.0.1:%d"
http: "127.0.0.1:%d"
jetstream {
  store_dir: %q%s
}
cluster {
  name: "replaybus"
  listen: "127.0.0.1:%d"
  advertise: "127.0.0.%d:1"
  no_advertise: true
  routes: [%s]
}
`, s.Name, s.ClientPort, s.HTTPPort, store, sync, s.routePort, 200+s.Index, strings.Join(routes, ", "))
	return os.WriteFile(s.conf, []byte(conf), 0o644)
}

// ClientURLs returns every server's client URL, comma-separated, in index
// order (what nats.Connect takes).
func (c *Cluster) ClientURLs() string {
	urls := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

// ByName returns the server of that server_name, or nil.
func (c *Cluster) ByName(name string) *Server {
	for _, s := range c.Servers {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Isolate cuts every route of server i (both directions) and keeps them cut
// until Heal; its clients stay connected.
func (c *Cluster) Isolate(i int) {
	for k, l := range c.links {
		if k[0] == i || k[1] == i {
			l.Cut()
		}
	}
}

// Heal restores the routes of server i.
func (c *Cluster) Heal(i int) {
	for k, l := range c.links {
		if k[0] == i || k[1] == i {
			l.Restore()
		}
	}
}

// Close kills every server and stops the relays. The data stays in
// Config.Dir.
func (c *Cluster) Close() {
	for _, s := range c.Servers {
		s.Kill()
	}
	for _, l := range c.links {
		l.Close()
	}
	c.http.CloseIdleConnections()
}

// URL is the server's nats:// client URL.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.ClientPort) }

// LogFile is the path of the server's log.
func (s *Server) LogFile() string { return s.log }

// Start starts the server's process (again, after Kill) on its ports and
// data folder. It does not wait for it to be ready (see WaitHealthy).
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		select {
		case <-s.done:
		default:
			return fmt.Errorf("natscluster: %s is running", s.Name)
		}
	}
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "-c", s.conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The servers die with the harness, whatever kills it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("natscluster: starting %s: %w", s.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(done)
	}()
	s.cmd, s.done = cmd, done
	return nil
}

// Running reports whether the server's process runs.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL to the server's process and waits for it to exit: no
// shutdown, no flush, what a crash or power loss of the process does.
// Idempotent.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// WaitHealthy waits until the server's monitoring /healthz answers 200
// (nats-server's own readiness: JetStream enabled, the meta group and
// every stream and consumer assigned to it current) or ctx ends.
func (s *Server) WaitHealthy(ctx context.Context) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", s.HTTPPort)
	var last string
	for {
		if !s.Running() {
			return fmt.Errorf("%w: %s (its log %s ends: %s)", errExited, s.Name, s.log, tail(s.log))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := s.http.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("natscluster: %s not healthy (%s): %w", s.Name, last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tail returns the last line of the file at path.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// errNoServer: no server could answer a JetStream API request.
var errNoServer = errors.New("natscluster: no server answered")
