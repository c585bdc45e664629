package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// child is a process of this program (serve or clients) that printed its
// addresses on its first line of output.
type child struct {
	name  string
	cmd   *exec.Cmd
	addrs []string
	done  chan struct{}
}

// startChild runs this program with args, its stderr to dir/name.log, and
// waits for its first line (its addresses).
func startChild(dir, name string, args ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(dir + "/" + name + ".log")
	if err != nil {
		return nil, err
	}
	c := &child{name: name, cmd: exec.Command(exe, args...), done: make(chan struct{})}
	c.cmd.Stderr = logf
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = c.cmd.Wait(); logf.Close(); close(c.done) }()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l := <-line:
		if l == "" {
			return nil, fmt.Errorf("%s exited at start (see %s.log)", name, name)
		}
		c.addrs = strings.Fields(l)
		return c, nil
	case <-time.After(2 * time.Minute):
		c.kill()
		return nil, fmt.Errorf("%s did not start (see %s.log)", name, name)
	}
}

// stop ends the child with SIGTERM, SIGKILL after 20 s.
func (c *child) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		c.kill()
	}
}

// kill sends SIGKILL and waits.
func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

// cpu returns the child's CPU time so far (user + system, /proc).
func (c *child) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command name in parentheses; utime and stime
	// are the 14th and 15th fields of the line, in clock ticks (100/s).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

var ctlClient = &http.Client{Timeout: 5 * time.Minute}

// get decodes the JSON answer of GET url.
func get(url string, v any) error {
	resp, err := ctlClient.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s %s", url, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// post sends POST url and waits for its answer.
func post(url string) error {
	resp, err := ctlClient.Post(url, "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST %s: %s %s", url, resp.Status, b)
	}
	return nil
}
