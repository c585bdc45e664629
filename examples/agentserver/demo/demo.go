package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// Defaults of [Options].
const (
	// DefaultParent is the parent session's id.
	DefaultParent = "demo"
	// DefaultTokensPerSecond is the rate of text deltas per agent.
	DefaultTokensPerSecond = 30
	// DefaultPause is the quiet time between two runs.
	DefaultPause = 3 * time.Second
)

// Event types the demo publishes: ACP session/update kinds plus the turn
// lifecycle.
const (
	TypeMessageChunk   = acp.TypeMessageChunk
	TypeUserMessage    = acp.TypeUserMessageChunk
	TypeThoughtChunk   = acp.TypeThoughtChunk
	TypeToolCall       = acp.TypeToolCall
	TypeToolCallUpdate = acp.TypeToolCallUpdate
	TypePlan           = acp.TypePlan
	TypeTurnStart      = frame.TypeTurnStart
	TypeTurnEnd        = frame.TypeTurnEnd
)

// Types lists every event type the demo publishes.
var Types = []string{TypeTurnStart, TypeUserMessage, TypeThoughtChunk, TypeMessageChunk, TypePlan, TypeToolCall, TypeToolCallUpdate, TypeTurnEnd}

// Options configure [Run]. The zero value runs forever on session "demo" at
// 30 tokens per second with a 3 s pause between runs.
type Options struct {
	// Parent is the parent agent's session id; "" means DefaultParent.
	// Child sessions are named "<Parent>-researcher-<run>" and
	// "<Parent>-coder-<run>".
	Parent string
	// TokensPerSecond is each agent's rate of text deltas; each delay is
	// jittered by ±50 %. Zero means DefaultTokensPerSecond.
	TokensPerSecond float64
	// Pause is the wait between runs; zero means DefaultPause, negative none.
	Pause time.Duration
	// Runs stops after this many runs; zero means run until ctx ends.
	Runs int
	// Seed seeds the jitter and tool results; zero draws a random seed.
	Seed uint64
	// Logger receives one info record per run; nil means none.
	Logger *slog.Logger
}

// Run creates the parent session (a root, if it does not exist yet) and
// publishes runs to bus until ctx ends or Options.Runs runs are done. It
// blocks; every goroutine it starts has returned when it returns.
//
// Each agent's reply is a turn (eventbus.Bus.StartTurn): a cancel of the
// parent's turn — the page's Stop button, POST /session/demo/cancel —
// stops the whole run (the sub-agents' turns end with it: they run under
// the parent turn's context), a cancel of a sub-agent's turn stops that
// sub-agent and the parent finishes without it; either way the run's
// children are closed and the next run follows after the pause.
//
// It returns nil when ctx ended or the runs are done, and otherwise the
// first bus error (eventbus.ErrClosed after the bus was closed,
// eventbus.ErrSessionClosed when someone closed a demo session).
func Run(ctx context.Context, bus *eventbus.Bus, o Options) error {
	if o.Parent == "" {
		o.Parent = DefaultParent
	}
	if o.TokensPerSecond <= 0 {
		o.TokensPerSecond = DefaultTokensPerSecond
	}
	if o.Pause == 0 {
		o.Pause = DefaultPause
	}
	seed := o.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	if err := bus.CreateSession(o.Parent, ""); err != nil {
		return err
	}
	for n := 1; o.Runs == 0 || n <= o.Runs; n++ {
		if o.Logger != nil {
			o.Logger.Info("demo run", "run", n, "session", o.Parent)
		}
		r := &run{bus: bus, o: o, n: n, rng: rand.New(rand.NewPCG(seed, uint64(n)))}
		err := r.parent(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errStopped) {
			if o.Logger != nil {
				o.Logger.Info("demo run stopped", "run", n, "session", o.Parent, "why", err)
			}
			err = nil
		}
		if err != nil {
			return err
		}
		if o.Pause > 0 && !sleep(ctx, o.Pause) {
			return nil
		}
	}
	return nil
}

// run is one turn of the parent agent and its two sub-agents.
type run struct {
	bus   *eventbus.Bus
	o     Options
	n     int
	mu    sync.Mutex // guards rng and tools
	rng   *rand.Rand
	tools int
}

// agent publishes one session's traffic, in its turn.
type agent struct {
	r       *run
	session string
	name    string
	// turn is the agent's turn, from begin: its events are published with
	// turn.Publish (refused once the turn has ended, so nothing of it
	// follows its turn_end), its pace follows turn.Context() (which ends
	// at a cancel).
	turn   *eventbus.Turn
	status string // the agent status set last
}

// errStopped is why a run, or an agent's part of it, stopped before its
// end: its turn was cancelled.
var errStopped = errors.New("demo: turn cancelled")

func (r *run) agent(session, name string) *agent {
	return &agent{r: r, session: session, name: name}
}

// float returns a random number in [0, 1).
func (r *run) float() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.Float64()
}

// toolID returns a new tool call id, unique within the run.
func (r *run) toolID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tools++
	return fmt.Sprintf("call_%d_%03d", r.n, r.tools)
}

// update publishes one session/update notification's params in the turn.
func (a *agent) update(u acp.Update) error {
	n := acp.Notification{SessionID: a.session, Update: u}
	if _, err := a.turn.Publish(n.Type(), n); err != nil {
		return a.ended(err)
	}
	return nil
}

// setStatus sets the agent status shown by presence (thinking, streaming,
// waiting), when it changes.
func (a *agent) setStatus(status string) error {
	if status == a.status {
		return nil
	}
	if err := a.turn.SetStatus(status); err != nil {
		return a.ended(err)
	}
	a.status = status
	return nil
}

// begin starts the agent's turn under ctx (a sub-agent's: the parent
// turn's context, so that stopping the parent stops it): turn_start
// {"turn", "session"}.
func (a *agent) begin(ctx context.Context) error {
	t, err := a.r.bus.StartTurn(ctx, a.session, eventbus.TurnOptions{ID: fmt.Sprintf("turn-%d", a.r.n)})
	if err != nil {
		return err
	}
	a.turn = t
	return nil
}

// finish ends the agent's turn (turn_end {"turn", "reason": "complete"}).
func (a *agent) finish() error {
	_, err := a.turn.End(nil)
	return err
}

// ended says why the turn's context ended, or a publish failed: errStopped
// (wrapping the cause) when the turn has ended cancelled, eventbus.ErrClosed
// when its producer was lost (the bus closed), else err.
func (a *agent) ended(err error) error {
	if a.turn.Context().Err() == nil && !errors.Is(err, eventbus.ErrTurnEnded) {
		return err
	}
	end, eerr := a.turn.End(nil) // the end already written, if any
	if eerr != nil {
		return err
	}
	var d frame.TurnData
	_ = json.Unmarshal(end.Data, &d)
	switch d.Reason {
	case frame.ReasonCancelled:
		return fmt.Errorf("%w: %s", errStopped, context.Cause(a.turn.Context()))
	case frame.ReasonProducerLost:
		return fmt.Errorf("%w: %s", eventbus.ErrClosed, d.Message)
	}
	return err
}

// stream publishes text as chunks (acp.MessageChunk or acp.ThoughtChunk)
// at the token rate, with the agent status status.
func (a *agent) stream(status string, chunk func(string) acp.ContentChunk, text string) error {
	if err := a.setStatus(status); err != nil {
		return err
	}
	for _, tok := range tokens(text) {
		if err := a.pace(1); err != nil {
			return err
		}
		if err := a.update(chunk(tok)); err != nil {
			return err
		}
	}
	return nil
}

func (a *agent) say(text string) error {
	return a.stream("streaming", acp.MessageChunk, text)
}

func (a *agent) think(text string) error {
	return a.stream("thinking", acp.ThoughtChunk, text)
}

// pace sleeps for n tokens' worth of time, jittered; the turn's end when
// its context ended first (a cancel).
func (a *agent) pace(n float64) error {
	d := time.Duration(n * (0.5 + a.r.float()) * float64(time.Second) / a.r.o.TokensPerSecond)
	if !sleep(a.turn.Context(), d) {
		return a.ended(context.Cause(a.turn.Context()))
	}
	return nil
}

// tool publishes a tool call from pending through in_progress to completed,
// taking about work tokens' worth of time.
func (a *agent) tool(kind, title string, input map[string]any, work float64, result string) error {
	id := a.r.toolID()
	if err := a.setStatus("thinking"); err != nil {
		return err
	}
	if err := a.update(acp.ToolCall{ToolCallID: id, Title: title, Kind: kind, Status: acp.StatusPending, RawInput: input}); err != nil {
		return err
	}
	if err := a.pace(3); err != nil {
		return err
	}
	if err := a.update(acp.ToolCallUpdate{ToolCallID: id, Status: acp.StatusInProgress}); err != nil {
		return err
	}
	if err := a.pace(work); err != nil {
		return err
	}
	return a.update(acp.ToolCallUpdate{ToolCallID: id, Status: acp.StatusCompleted,
		Content: []acp.ToolCallContent{acp.TextContent(result)}})
}

// planEntry is one entry of an ACP plan.
type planEntry = acp.PlanEntry

func (a *agent) plan(entries []planEntry) error {
	return a.update(acp.Plan{Entries: append([]planEntry(nil), entries...)})
}

// parent is the parent agent's turn: plan, spawn two sub-agents, wait,
// verify, answer; then the children are closed, however the turn ended.
func (r *run) parent(ctx context.Context) error {
	p := r.agent(r.o.Parent, "orchestrator")
	if err := p.begin(ctx); err != nil {
		return err
	}
	var children []string
	err := r.orchestrate(p, &children)
	if err != nil && !errors.Is(err, errStopped) {
		_, _ = p.turn.End(err) // a failure, not a stop: the turn says so
	}
	for _, c := range children {
		if cerr := r.bus.CloseSession(c); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// orchestrate is the parent's turn; it adds each child it creates to
// children.
func (r *run) orchestrate(p *agent, children *[]string) error {
	t := tasks[(r.n-1)%len(tasks)]
	if err := p.update(acp.UserMessageChunk(t.prompt)); err != nil {
		return err
	}
	if err := p.think(t.thought); err != nil {
		return err
	}
	plan := []planEntry{
		{Content: t.research.goal, Priority: "high", Status: "pending"},
		{Content: t.code.goal, Priority: "high", Status: "pending"},
		{Content: "Run the test suite and summarise the change", Priority: "medium", Status: "pending"},
	}
	if err := p.plan(plan); err != nil {
		return err
	}
	if err := p.say(t.intro); err != nil {
		return err
	}

	kids := []struct {
		role string
		s    script
		slot int
	}{{"researcher", t.research, 0}, {"coder", t.code, 1}}
	var wg sync.WaitGroup
	errs := make([]error, len(kids))
	var planMu sync.Mutex
	setPlan := func(i int, status string) error {
		planMu.Lock()
		defer planMu.Unlock()
		plan[i].Status = status
		return p.plan(plan)
	}
	for i, k := range kids {
		child := fmt.Sprintf("%s-%s-%d", r.o.Parent, k.role, r.n)
		if err := r.bus.CreateSession(child, r.o.Parent); err != nil {
			return err
		}
		*children = append(*children, child)
		spawn := r.toolID()
		if err := p.update(acp.ToolCall{ToolCallID: spawn, Title: "Spawn sub-agent " + k.role, Kind: "other", Status: acp.StatusPending,
			RawInput: map[string]any{"agent": k.role, "session": child, "goal": k.s.goal}}); err != nil {
			return err
		}
		if err := p.update(acp.ToolCallUpdate{ToolCallID: spawn, Status: acp.StatusInProgress}); err != nil {
			return err
		}
		if err := setPlan(k.slot, "in_progress"); err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := r.agent(child, k.role)
			// Under the parent turn's context: a stop of the parent
			// stops its sub-agents.
			err := a.script(p.turn.Context(), k.s)
			status, result := acp.StatusCompleted, k.s.summary
			if errors.Is(err, errStopped) {
				status, result, err = acp.StatusFailed, "sub-agent stopped: "+err.Error(), nil
			}
			if errs[i] = err; err != nil {
				return
			}
			if errs[i] = p.update(acp.ToolCallUpdate{ToolCallID: spawn, Status: status,
				Content: []acp.ToolCallContent{acp.TextContent(result)}}); errs[i] != nil {
				return
			}
			errs[i] = setPlan(k.slot, "completed")
		}()
	}
	if err := p.setStatus("waiting"); err != nil {
		wg.Wait()
		return err
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		if p.turn.Context().Err() != nil {
			return p.ended(err) // the parent was stopped: one reason, not one per sub-agent
		}
		return err
	}

	if err := setPlan(2, "in_progress"); err != nil {
		return err
	}
	if err := p.tool("execute", "Run go test ./...", map[string]any{"command": "go test -race ./..."}, 40, t.testOutput); err != nil {
		return err
	}
	if err := setPlan(2, "completed"); err != nil {
		return err
	}
	if err := p.say(t.answer); err != nil {
		return err
	}
	return p.finish()
}

// script runs one sub-agent's turn under ctx.
func (a *agent) script(ctx context.Context, s script) error {
	if err := a.begin(ctx); err != nil {
		if ctx.Err() != nil { // the parent stopped before this turn began
			return fmt.Errorf("%w: %w", errStopped, context.Cause(ctx))
		}
		return err
	}
	err := a.steps(s)
	if err != nil && !errors.Is(err, errStopped) {
		_, _ = a.turn.End(err)
	}
	return err
}

func (a *agent) steps(s script) error {
	if err := a.think(s.thought); err != nil {
		return err
	}
	for _, st := range s.steps {
		if st.say != "" {
			if err := a.say(st.say); err != nil {
				return err
			}
		}
		if st.tool.title != "" {
			if err := a.tool(st.tool.kind, st.tool.title, st.tool.input, st.tool.work, st.tool.result); err != nil {
				return err
			}
		}
	}
	if err := a.say(s.summary); err != nil {
		return err
	}
	return a.finish()
}

// tokens splits text into deltas the way a tokenizer roughly does: words
// with their leading space, long words in pieces of up to five bytes.
func tokens(text string) []string {
	var out []string
	for _, w := range strings.SplitAfter(text, " ") {
		if w == "" {
			continue
		}
		for len(w) > 6 {
			cut := 5
			for cut < len(w) && w[cut]&0xC0 == 0x80 { // keep UTF-8 sequences whole
				cut++
			}
			out = append(out, w[:cut])
			w = w[cut:]
		}
		out = append(out, w)
	}
	return out
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
