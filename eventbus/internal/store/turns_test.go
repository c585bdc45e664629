package store

import (
	"encoding/json"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/queue"
)

// A session remembers exactly its max(MaxEndedTurns, log bound) most
// recently ended turns, so every turn whose turn_end its log holds, and
// never more, whatever the mix of turns, other records, clears and reused
// ids; a start of a remembered id is refused, of a forgotten one admitted.
func TestEndedTurnsAreBoundedByTheLog(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		records := rapid.IntRange(1, 80).Draw(rt, "records")
		h := NewHistory[subs](Config{Log: Options{Records: records}, TTL: 1 << 40})
		h.Lock()
		defer h.Unlock()
		x, err := h.Add("s", "", 1)
		if err != nil {
			rt.Fatal(err)
		}
		type ended struct {
			id  string
			end uint64
			nth int
		}
		var model []ended // every end, oldest first
		put := func(typ string, d frame.TurnData) *queue.Record {
			b, _ := json.Marshal(d)
			r := &queue.Record{Session: x.ID, Type: typ, Data: b, Nanos: 1}
			if typ == frame.TypeTurnStart || typ == frame.TypeTurnEnd {
				if x.CheckTurn(r) != TurnOK {
					return nil
				}
			}
			r.ID = h.NextID()
			h.Append(x, r)
			if typ != "other" {
				x.ApplyTurn(r, 0, nil)
			}
			return r
		}
		steps := rapid.IntRange(1, 400).Draw(rt, "steps")
		for i := range steps {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1, 2, 3: // a turn, its id perhaps one used before
				id := fmt.Sprint("t", i)
				if len(model) > 0 && rapid.Bool().Draw(rt, "reuse") {
					id = model[rapid.IntRange(0, len(model)-1).Draw(rt, "which")].id
				}
				known := x.EndedTurn(id) != nil
				if (put(frame.TypeTurnStart, frame.TurnData{Turn: id, Session: "s"}) == nil) != known {
					rt.Fatalf("step %d: turn_start of %s refused %v, want %v (remembered)", i, id, !known, known)
				}
				if known {
					continue
				}
				end := put(frame.TypeTurnEnd, frame.TurnData{Turn: id, Reason: frame.ReasonComplete})
				model = append(model, ended{id, end.ID, len(model) + 1})
			case 4:
				x.log.Clear()
			default:
				put("other", frame.TurnData{})
			}
			// The model: the newest end of each id, remembered while among
			// the keep newest ends; a turn whose end the log holds always is.
			keep := max(MaxEndedTurns, records)
			newest := map[string]ended{}
			for _, e := range model {
				newest[e.id] = e
			}
			for id, e := range newest {
				want := len(model)-e.nth < keep
				tn := x.EndedTurn(id)
				if (tn != nil) != want {
					rt.Fatalf("step %d: turn %s (end %d, %d of %d ends): remembered %v, want %v", i, id, e.end, e.nth, len(model), tn != nil, want)
				}
				if tn == nil && e.end > x.log.HighestEvicted() {
					rt.Fatalf("step %d: turn %s forgotten, its end %d still in the log", i, id, e.end)
				}
				if tn != nil && tn.EndID != e.end {
					rt.Fatalf("turn %s: end %d, want the newest %d", id, tn.EndID, e.end)
				}
			}
			if x.turns == nil {
				continue
			}
			if n := len(x.turns.ended); n > keep || len(x.turns.byID) != n {
				rt.Fatalf("step %d: %d ended turns held (%d indexed), more than %d", i, n, len(x.turns.byID), keep)
			}
		}
	})
}
