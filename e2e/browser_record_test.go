package e2e

// The check of a tab's record against every id the test server published
// (browser_harness_test.go).

import (
	"fmt"
	"strconv"
	"strings"
)

// recordCheck is the verdict on one tab's record against what the server
// published: exactly once and in order within each incarnation, every
// event the tab should hold present or its absence announced by a reset.
type recordCheck struct {
	events   int // events received (merged ones count each event they hold)
	frames   int // event frames received
	merged   int // frames holding more than one event
	lost     int // published, missing, and no reset said so
	dup      int // received twice (or out of order)
	surfaced int // missing, after a reset that said so (a restart's unsent tail)
	resets   int
	problems []string
}

// checkRecord judges a tab's record. complete says whether the tab is
// still open at the end (then it must hold everything of the current
// incarnation); a closed tab's record may stop anywhere.
func (s *browserServer) checkRecord(rec [][]any, complete bool) recordCheck {
	s.mu.Lock()
	byEpoch := map[string]*busLife{}
	for _, inc := range s.all {
		byEpoch[inc.bus.Epoch()] = inc
	}
	curEpoch := s.cur.bus.Epoch()
	s.mu.Unlock()

	var c recordCheck
	problem := func(f string, a ...any) {
		if len(c.problems) < 20 {
			c.problems = append(c.problems, fmt.Sprintf(f, a...))
		}
	}
	var epoch string
	var inc *busLife
	var lastID uint64 // the last id the tab holds in epoch
	reset := false    // a reset since the tab's last event
	published := func(inc *busLife, lo, hi uint64) []uint64 {
		inc.mu.Lock()
		defer inc.mu.Unlock()
		var out []uint64
		for _, id := range inc.ids {
			if id >= lo && id <= hi {
				out = append(out, id)
			}
		}
		return out
	}
	for i, e := range rec {
		switch e[0] {
		case "r":
			c.resets++
			reset = true
			if e[1] != "epoch_reset" {
				problem("entry %d: a %v reset, not expected with replay buffers this large", i, e[1])
			}
		case "e":
			cursor, _ := e[1].(string)
			first, id := uint64(e[2].(float64)), uint64(e[3].(float64))
			typ, text := e[4].(string), e[5].(string)
			ep := cursor[:max(0, strings.LastIndexByte(cursor, '-'))]
			if ep != epoch {
				if epoch != "" {
					if !reset {
						problem("entry %d: moved from epoch %s to %s without a reset", i, epoch, ep)
						c.lost += len(published(inc, lastID+1, 1<<62))
					} else {
						c.surfaced += len(published(inc, lastID+1, 1<<62)) // the old incarnation's unsent tail
					}
				}
				epoch, inc, lastID, reset = ep, byEpoch[ep], 0, false
				if inc == nil {
					problem("entry %d: unknown epoch %s", i, ep)
					return c
				}
			}
			c.frames++
			if first <= lastID {
				c.dup += len(published(inc, first, min(id, lastID)))
				problem("entry %d: ids %d…%d after %d", i, first, id, lastID)
			}
			if missing := published(inc, lastID+1, first-1); len(missing) > 0 {
				if reset {
					c.surfaced += len(missing)
				} else {
					c.lost += len(missing)
					problem("entry %d: %d events lost before id %d (first %d)", i, len(missing), first, missing[0])
				}
			}
			held := published(inc, first, id)
			c.events += len(held)
			if len(held) > 1 {
				c.merged++
			}
			// A merged frame's text is exactly the chunks of the ids it names.
			if typ == "agent_message_chunk" {
				var want strings.Builder
				inc.mu.Lock()
				for _, h := range held {
					if k, ok := inc.chunk[h]; ok {
						want.WriteString(strconv.Itoa(k) + ";")
					}
				}
				inc.mu.Unlock()
				if text != want.String() {
					problem("entry %d: ids %d…%d hold text %q, want %q", i, first, id, text, want.String())
				}
			}
			lastID, reset = max(lastID, id), false
		}
	}
	if complete && inc == nil {
		s.mu.Lock()
		cur := s.cur
		s.mu.Unlock()
		if tail := published(cur, 1, 1<<62); len(tail) > 0 {
			c.lost += len(tail)
			problem("the record holds no event, %d were published", len(tail))
		}
	}
	if complete && inc != nil {
		if epoch != curEpoch {
			problem("the record ends in epoch %s, the server is at %s", epoch, curEpoch)
		} else if tail := published(inc, lastID+1, 1<<62); len(tail) > 0 {
			c.lost += len(tail)
			problem("%d events after id %d never arrived", len(tail), lastID)
		}
	}
	return c
}
