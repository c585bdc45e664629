package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/eventbus"
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
	TypeThoughtChunk   = acp.TypeThoughtChunk
	TypeToolCall       = acp.TypeToolCall
	TypeToolCallUpdate = acp.TypeToolCallUpdate
	TypePlan           = acp.TypePlan
	TypeTurnStart      = "turn_start"
	TypeTurnEnd        = "turn_end"
)

// Types lists every event type the demo publishes.
var Types = []string{TypeTurnStart, TypeThoughtChunk, TypeMessageChunk, TypePlan, TypeToolCall, TypeToolCallUpdate, TypeTurnEnd}

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

// agent publishes one session's traffic.
type agent struct {
	r       *run
	session string
	name    string
	// pl publishes the agent's events: over NATS JetStream it keeps up to
	// 256 acks in flight instead of waiting for each (on the in-memory bus
	// each publish is synchronous anyway). Flushed at the end of the turn.
	pl *eventbus.Pipeline
}

func (r *run) agent(session, name string) *agent {
	pl, err := eventbus.NewPipeline(r.bus, eventbus.PipelineOptions{})
	if err != nil {
		panic(err) // the default window is valid
	}
	return &agent{r: r, session: session, name: name, pl: pl}
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

// update publishes one session/update notification's params.
func (a *agent) update(u acp.Update) error {
	n := acp.Notification{SessionID: a.session, Update: u}
	return a.pl.Publish(a.session, n.Type(), n)
}

// lifecycle publishes turn_start or turn_end.
func (a *agent) lifecycle(typ string, fields map[string]any) error {
	d := map[string]any{"sessionId": a.session, "agent": a.name, "turn": a.r.n}
	for k, v := range fields {
		d[k] = v
	}
	if err := a.pl.Publish(a.session, typ, d); err != nil {
		return err
	}
	if typ == TypeTurnEnd {
		// Every event of the turn stored (or the error) before the
		// turn counts as done.
		return a.pl.Flush(context.Background())
	}
	return nil
}

// stream publishes text as chunks (acp.MessageChunk or acp.ThoughtChunk)
// at the token rate.
func (a *agent) stream(ctx context.Context, chunk func(string) acp.ContentChunk, text string) error {
	for _, tok := range tokens(text) {
		if !a.pace(ctx, 1) {
			return ctx.Err()
		}
		if err := a.update(chunk(tok)); err != nil {
			return err
		}
	}
	return nil
}

func (a *agent) say(ctx context.Context, text string) error {
	return a.stream(ctx, acp.MessageChunk, text)
}

func (a *agent) think(ctx context.Context, text string) error {
	return a.stream(ctx, acp.ThoughtChunk, text)
}

// pace sleeps for n tokens' worth of time, jittered; false when ctx ended.
func (a *agent) pace(ctx context.Context, n float64) bool {
	d := time.Duration(n * (0.5 + a.r.float()) * float64(time.Second) / a.r.o.TokensPerSecond)
	return sleep(ctx, d)
}

// tool publishes a tool call from pending through in_progress to completed,
// taking about work tokens' worth of time.
func (a *agent) tool(ctx context.Context, kind, title string, input map[string]any, work float64, result string) error {
	id := a.r.toolID()
	if err := a.update(acp.ToolCall{ToolCallID: id, Title: title, Kind: kind, Status: acp.StatusPending, RawInput: input}); err != nil {
		return err
	}
	if !a.pace(ctx, 3) {
		return ctx.Err()
	}
	if err := a.update(acp.ToolCallUpdate{ToolCallID: id, Status: acp.StatusInProgress}); err != nil {
		return err
	}
	if !a.pace(ctx, work) {
		return ctx.Err()
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
// verify, answer, close the children.
func (r *run) parent(ctx context.Context) error {
	t := tasks[(r.n-1)%len(tasks)]
	p := r.agent(r.o.Parent, "orchestrator")
	if err := p.lifecycle(TypeTurnStart, map[string]any{"prompt": t.prompt}); err != nil {
		return err
	}
	if err := p.think(ctx, t.thought); err != nil {
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
	if err := p.say(ctx, t.intro); err != nil {
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
			if errs[i] = a.script(ctx, k.s); errs[i] != nil {
				return
			}
			if errs[i] = p.update(acp.ToolCallUpdate{ToolCallID: spawn, Status: acp.StatusCompleted,
				Content: []acp.ToolCallContent{acp.TextContent(k.s.summary)}}); errs[i] != nil {
				return
			}
			errs[i] = setPlan(k.slot, "completed")
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	if err := setPlan(2, "in_progress"); err != nil {
		return err
	}
	if err := p.tool(ctx, "execute", "Run go test ./...", map[string]any{"command": "go test -race ./..."}, 40, t.testOutput); err != nil {
		return err
	}
	if err := setPlan(2, "completed"); err != nil {
		return err
	}
	if err := p.say(ctx, t.answer); err != nil {
		return err
	}
	if err := p.lifecycle(TypeTurnEnd, map[string]any{"stopReason": "end_turn"}); err != nil {
		return err
	}
	for _, k := range kids {
		if err := r.bus.CloseSession(fmt.Sprintf("%s-%s-%d", r.o.Parent, k.role, r.n)); err != nil {
			return err
		}
	}
	return nil
}

// script runs one sub-agent's turn.
func (a *agent) script(ctx context.Context, s script) error {
	if err := a.lifecycle(TypeTurnStart, map[string]any{"prompt": s.goal}); err != nil {
		return err
	}
	if err := a.think(ctx, s.thought); err != nil {
		return err
	}
	for _, st := range s.steps {
		if st.say != "" {
			if err := a.say(ctx, st.say); err != nil {
				return err
			}
		}
		if st.tool.title != "" {
			if err := a.tool(ctx, st.tool.kind, st.tool.title, st.tool.input, st.tool.work, st.tool.result); err != nil {
				return err
			}
		}
	}
	if err := a.say(ctx, s.summary); err != nil {
		return err
	}
	return a.lifecycle(TypeTurnEnd, map[string]any{"stopReason": "end_turn"})
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
