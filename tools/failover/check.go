package main

import (
	"fmt"
	"slices"
	"sort"
)

// The checker: what a run must prove, computed from what the harness saw
// (acks, deliveries) and what the stream holds at the end. It is a pure
// function of those records, so that check_test.go can feed it histories
// with every kind of defect.

// key names one producer's event: producer id and sequence.
type key struct {
	Producer string
	Seq      uint64
}

func (k key) String() string { return fmt.Sprintf("%s#%d", k.Producer, k.Seq) }

// stored is one event the stream holds at the end.
type stored struct {
	ID      uint64
	Session string
	Key     key
}

// ack is one publish the harness saw acknowledged: 202 with the event's
// id, or 200 duplicate (stored before; ID 0).
type ack struct {
	Key key
	ID  uint64 // 0 for a duplicate
	// Partitioned: the ack arrived while a server was cut off from the
	// others (a minority leader must not have acknowledged it).
	Partitioned bool
}

// item is one frame a subscriber read: an event (ID > 0) or a gap
// announcement (Gap set).
type item struct {
	ID  uint64
	Key key
	Gap *gapFrame
}

// gapFrame is a state_resync_required frame: events after After and below
// CompleteFrom may be missing (CompleteFrom 0: up to the next event read).
type gapFrame struct {
	Reason       string
	After        uint64
	CompleteFrom uint64
}

// subscriberLog is everything one live subscriber read, in order.
type subscriberLog struct {
	Name    string
	Session string
	Items   []item
}

// verdict is the checker's result. Failed lists every violated property;
// empty means the run proved what it must.
type verdict struct {
	Stored, Acked, AckedDup, AckedPartitioned   int
	Lost, AckMismatch, DupStored, ProducerOrder []string
	Delivered, Duplicated, Reordered, Phantom   int
	AnnouncedGaps, AnnouncedMissing, SilentGaps int
	SilentExamples                              []string
	Failed                                      []string
}

// maxExamples bounds each list of examples kept in a verdict.
const maxExamples = 10

func addExample(list *[]string, s string) {
	if len(*list) < maxExamples {
		*list = append(*list, s)
	}
}

// check proves or refutes, from the stream's final content st (in id
// order), the acks and the subscribers' logs:
//   - every acknowledged event is stored, and a 202's id holds that very
//     event (a minority leader's ack would be lost or overwritten);
//   - no producer sequence is stored twice, and each producer's sequences
//     are stored in order without a hole;
//   - every subscriber read every stored event of its session exactly
//     once, in id order, or was told by a gap frame that it may miss it,
//     and read nothing the stream does not hold.
func check(st []stored, acks []ack, subs []subscriberLog) verdict {
	var v verdict
	v.Stored = len(st)
	byID := make(map[uint64]stored, len(st))
	count := make(map[key]int, len(st))
	lastSeq := map[string]int64{}
	bySession := map[string][]uint64{}
	for _, e := range st {
		byID[e.ID] = e
		count[e.Key]++
		if count[e.Key] == 2 {
			addExample(&v.DupStored, fmt.Sprintf("%v (again at id %d)", e.Key, e.ID))
		}
		if want, ok := lastSeq[e.Key.Producer]; count[e.Key] == 1 && (ok && int64(e.Key.Seq) != want+1 || !ok && e.Key.Seq != 0) {
			addExample(&v.ProducerOrder, fmt.Sprintf("%v stored at id %d after seq %d", e.Key, e.ID, want))
		}
		if count[e.Key] == 1 {
			lastSeq[e.Key.Producer] = int64(e.Key.Seq)
		}
		bySession[e.Session] = append(bySession[e.Session], e.ID)
	}
	for _, a := range acks {
		v.Acked++
		if a.ID == 0 {
			v.AckedDup++
		}
		if a.Partitioned {
			v.AckedPartitioned++
		}
		if count[a.Key] == 0 {
			addExample(&v.Lost, fmt.Sprintf("%v (acked id %d)", a.Key, a.ID))
			continue
		}
		if a.ID != 0 && byID[a.ID].Key != a.Key {
			addExample(&v.AckMismatch, fmt.Sprintf("%v acked at id %d, which holds %v", a.Key, a.ID, byID[a.ID].Key))
		}
	}
	for _, s := range subs {
		checkSubscriber(&v, s, byID, bySession[s.Session])
	}
	fail := func(cond bool, format string, args ...any) {
		if cond {
			v.Failed = append(v.Failed, fmt.Sprintf(format, args...))
		}
	}
	fail(len(v.Lost) > 0, "acknowledged events not stored: %v", v.Lost)
	fail(len(v.AckMismatch) > 0, "acknowledged ids holding another event: %v", v.AckMismatch)
	fail(len(v.DupStored) > 0, "producer sequences stored twice: %v", v.DupStored)
	fail(len(v.ProducerOrder) > 0, "producer sequences stored out of order or with a hole: %v", v.ProducerOrder)
	fail(v.Duplicated > 0, "%d events delivered twice to one subscriber", v.Duplicated)
	fail(v.Reordered > 0, "%d events delivered out of order", v.Reordered)
	fail(v.Phantom > 0, "%d events delivered that the stream does not hold", v.Phantom)
	fail(v.SilentGaps > 0, "%d stored events silently missing at a subscriber: %v", v.SilentGaps, v.SilentExamples)
	return v
}

// checkSubscriber checks one subscriber's log against its session's stored
// ids (ascending).
func checkSubscriber(v *verdict, s subscriberLog, byID map[uint64]stored, ids []uint64) {
	got := make(map[uint64]bool, len(s.Items))
	var last uint64
	type span struct{ from, to uint64 } // ids in (from, to) may be missing
	var spans []span
	for i, it := range s.Items {
		if it.Gap != nil {
			v.AnnouncedGaps++
			to := it.Gap.CompleteFrom
			if to == 0 {
				to = ^uint64(0)
				for _, next := range s.Items[i+1:] {
					if next.Gap == nil {
						to = next.ID
						break
					}
				}
			}
			spans = append(spans, span{it.Gap.After, to})
			continue
		}
		switch {
		case got[it.ID]:
			v.Duplicated++
			continue
		case it.ID < last:
			v.Reordered++
		}
		got[it.ID] = true
		v.Delivered++
		if e, ok := byID[it.ID]; !ok || e.Key != it.Key || e.Session != s.Session {
			v.Phantom++
		}
		last = max(last, it.ID)
	}
	for _, id := range ids {
		if got[id] {
			continue
		}
		if slices.ContainsFunc(spans, func(sp span) bool { return id > sp.from && id < sp.to }) {
			v.AnnouncedMissing++
			continue
		}
		v.SilentGaps++
		addExample(&v.SilentExamples, fmt.Sprintf("%s: id %d (%v)", s.Name, id, byID[id].Key))
	}
}

// percentile returns the p-th percentile (0–100) of xs by nearest rank; 0
// for none.
func percentile[T ~int64 | ~float64](xs []T, p float64) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p/100*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}
