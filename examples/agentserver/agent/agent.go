package agent

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/eventbus"
)

// Bounds and defaults of the model.
const (
	// DefaultTokensPerSecond is the pace of text deltas when the rate is zero.
	DefaultTokensPerSecond = 30
	// MaxStream is the largest N of a "stream N" message.
	MaxStream = 100_000
	// MaxText bounds a message's text, in bytes.
	MaxText = 16 << 10
)

// The agent statuses the model sets (eventbus.Turn.SetStatus); the bus
// sets idle when the turn ends.
const (
	StatusThinking  = "thinking"
	StatusStreaming = "streaming"
)

// Reply is the model's reply to one message: the updates it publishes, in
// order, and the pace before each. The same text gives the same Reply.
// A Reply is a value; Run may be called on it any number of times.
type Reply struct {
	text string
	n    int              // how many updates
	at   func(i int) step // the i-th, made when it is published (a stream of 100,000 is not held)
}

// step is one update, the status the agent has while it is published, and
// the time before it, in deltas (1/rate seconds each).
type step struct {
	status string
	u      acp.Update
	pace   float64
}

// Plan returns the reply to text: for "stream N" (1 ≤ N ≤ MaxStream),
// exactly N agent_message_chunk deltas and then one tool call with its
// result; for any other text, a thought, a search tool call and an answer
// derived from the text alone. Errors (matching eventbus.ErrInvalid,
// naming the value): an empty or blank text, one over MaxText bytes, a
// "stream" whose count is not a number from 1 to MaxStream.
func Plan(text string) (Reply, error) {
	switch {
	case strings.TrimSpace(text) == "":
		return Reply{}, fmt.Errorf("%w: empty text", eventbus.ErrInvalid)
	case len(text) > MaxText:
		return Reply{}, fmt.Errorf("%w: text of %d bytes is over %d", eventbus.ErrInvalid, len(text), MaxText)
	}
	if f := strings.Fields(text); len(f) == 2 && f[0] == "stream" {
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 1 || n > MaxStream {
			return Reply{}, fmt.Errorf("%w: stream count %q (want a number from 1 to %d)", eventbus.ErrInvalid, f[1], MaxStream)
		}
		return streamReply(text, n), nil
	}
	return textReply(text), nil
}

// Len returns how many updates r publishes.
func (r Reply) Len() int { return r.n }

// streamReply is "stream n": n deltas, then a tool call and its result.
func streamReply(text string, n int) Reply {
	call := fmt.Sprintf("call_stream_%d", n)
	return Reply{text: text, n: n + 2, at: func(i int) step {
		switch {
		case i < n:
			return step{status: StatusStreaming, u: acp.MessageChunk(words[i%len(words)] + " "), pace: 1}
		case i == n:
			return step{status: StatusStreaming, pace: 1, u: acp.ToolCall{ToolCallID: call, Title: "Count the streamed chunks",
				Kind: "other", Status: acp.StatusPending, RawInput: map[string]any{"chunks": n}}}
		}
		return step{status: StatusStreaming, pace: 1, u: acp.ToolCallUpdate{ToolCallID: call, Status: acp.StatusCompleted,
			Content: []acp.ToolCallContent{acp.TextContent(fmt.Sprintf("streamed %d chunks", n))}}}
	}}
}

// words are the deltas of a stream, in turn.
var words = [...]string{"replay", "buffer", "cursor", "scope", "session", "event", "turn", "cancel", "presence", "resume"}

// textReply is the reply to any other text: what it says is drawn from a
// generator seeded with the text's hash.
func textReply(text string) Reply {
	h := fnv.New64a()
	_, _ = h.Write([]byte(text))
	seed := h.Sum64()
	rng := rand.New(rand.NewPCG(seed, seed>>1|1))
	key := keyword(text)
	matches := 1 + rng.IntN(40)
	call := fmt.Sprintf("call_%016x", seed)
	var steps []step
	steps = append(steps, step{u: acp.UserMessageChunk(text)})
	for _, tok := range tokens(fmt.Sprintf(thoughts[rng.IntN(len(thoughts))], key)) {
		steps = append(steps, step{status: StatusThinking, u: acp.ThoughtChunk(tok), pace: 1})
	}
	steps = append(steps,
		step{status: StatusThinking, pace: 1, u: acp.ToolCall{ToolCallID: call, Title: fmt.Sprintf("Search for %q", key), Kind: "search",
			Status: acp.StatusPending, RawInput: map[string]any{"pattern": key}}},
		step{status: StatusThinking, pace: 3, u: acp.ToolCallUpdate{ToolCallID: call, Status: acp.StatusInProgress}},
		step{status: StatusThinking, pace: 5, u: acp.ToolCallUpdate{ToolCallID: call, Status: acp.StatusCompleted,
			Content: []acp.ToolCallContent{acp.TextContent(fmt.Sprintf("%d matches for %q", matches, key))}}})
	for _, tok := range tokens(fmt.Sprintf(answers[rng.IntN(len(answers))], key, matches)) {
		steps = append(steps, step{status: StatusStreaming, u: acp.MessageChunk(tok), pace: 1})
	}
	return Reply{text: text, n: len(steps), at: func(i int) step { return steps[i] }}
}

var thoughts = [...]string{
	"The message is about %q. I should find where it is used before I answer.",
	"Start with a search for %q, then read what it turns up and summarise it.",
	"%q could mean a few things here; a search will tell which one the code means.",
}

var answers = [...]string{
	"I looked for %q and found %d places that use it. The main one is on the request path; the others are tests.",
	"%q appears %d times. Most uses go through one helper, so a change there covers all of them.",
	"Searching for %q gave %d matches. Nothing in them looks wrong, but the error path is untested.",
}

// keyword is the text's longest word (letters and digits), at most 32
// bytes; "it" for a text without one.
func keyword(text string) string {
	best := ""
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len(w) > len(best) {
			best = w
		}
	}
	if best == "" {
		return "it"
	}
	for len(best) > 32 {
		_, size := lastRune(best)
		best = best[:len(best)-size]
	}
	return best
}

func lastRune(s string) (rune, int) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i]&0xC0 != 0x80 {
			return rune(s[i]), len(s) - i
		}
	}
	return 0, len(s)
}

// tokens splits text into deltas the way a tokenizer roughly does: words
// with their leading space.
func tokens(text string) []string {
	var out []string
	for _, w := range strings.SplitAfter(text, " ") {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

// Run publishes r in turn t — each update an ACP session/update
// notification's params, published with t.Publish — at rate deltas per
// second (zero: DefaultTokensPerSecond), setting the agent status as it
// goes, and ends the turn (complete) after the last. It stops as soon as
// t.Context() ends — a cancel, whose turn_end the bus has written already
// — and returns nil then; a publish or status error ends the turn with
// reason error and is returned. It blocks until then.
func (r Reply) Run(t *eventbus.Turn, rate float64) error {
	if rate <= 0 {
		rate = DefaultTokensPerSecond
	}
	ctx := t.Context()
	p := pacer{start: time.Now(), per: float64(time.Second) / rate}
	status := ""
	for i := range r.n {
		s := r.at(i)
		if !p.wait(ctx, s.pace) {
			return nil
		}
		if s.status != "" && s.status != status {
			if err := t.SetStatus(s.status); err != nil {
				return r.fail(t, err)
			}
			status = s.status
		}
		n := acp.Notification{SessionID: t.Start().Session, Update: s.u}
		if _, err := t.Publish(n.Type(), n); err != nil {
			return r.fail(t, err)
		}
	}
	_, err := t.End(nil)
	return err
}

// fail ends t with err, unless the turn ended meanwhile (a cancel that
// raced the publish: not a failure).
func (r Reply) fail(t *eventbus.Turn, err error) error {
	if errors.Is(err, eventbus.ErrTurnEnded) || t.Context().Err() != nil {
		return nil
	}
	_, _ = t.End(err)
	return err
}

// pacer spaces the updates: the i-th delta is due at start + i/rate, so
// that the rate holds however long each publish takes, and nothing sleeps
// for less than a millisecond (at high rates several go out per wake-up).
type pacer struct {
	start time.Time
	per   float64 // ns per delta
	due   float64 // deltas due so far
}

// wait waits until n more deltas are due; false when ctx ended.
func (p *pacer) wait(ctx context.Context, n float64) bool {
	p.due += n
	d := time.Until(p.start.Add(time.Duration(p.due * p.per)))
	if d < time.Millisecond {
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
