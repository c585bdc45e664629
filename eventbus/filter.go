package eventbus

import "github.com/replaybus/replaybus/eventbus/frame"

// typeFilter is the set of event types a subscription receives
// (SubscribeOptions.Types): a few types, found by a linear scan; none is
// every type. It also holds the set of a many-sessions subscription
// (multi.go), so that a Subscription keeps its size.
type typeFilter struct {
	types []string
	set   *sessionSet
}

// setOf returns s's many-sessions set, nil for any other subscription.
func (s *Subscription) setOf() *sessionSet {
	if s.filter == nil {
		return nil
	}
	return s.filter.set
}

// setFilter validates types and turns the filter on when there are any.
func (s *Subscription) setFilter(types []string) error {
	if len(types) == 0 {
		return nil
	}
	if err := frame.CheckTypes(types); err != nil {
		return invalidf("%v", err)
	}
	s.filter = &typeFilter{types: append([]string(nil), types...)}
	return nil
}

// has reports whether events of type t pass.
func (f *typeFilter) has(t string) bool {
	if f.types == nil {
		return true
	}
	for _, x := range f.types {
		if x == t {
			return true
		}
	}
	return false
}

// list returns the types, nil for a nil filter (every type).
func (f *typeFilter) list() []string {
	if f == nil {
		return nil
	}
	return f.types
}
