package eventbus

// maxFilterTypes bounds SubscribeOptions.Types.
const maxFilterTypes = 64

// typeFilter is the set of event types a subscription receives
// (SubscribeOptions.Types): a few types, found by a linear scan.
type typeFilter struct{ types []string }

// CheckTypes reports whether types is a valid [SubscribeOptions.Types]:
// at most 64 entries, each non-empty and free of white space and control
// characters. The error matches ErrInvalid and names the bad entry, as
// Subscribe's does. Adapters call it to refuse a request before
// subscribing.
func CheckTypes(types []string) error {
	if len(types) > maxFilterTypes {
		return invalidf("Types: %d entries (want at most %d)", len(types), maxFilterTypes)
	}
	for _, t := range types {
		if err := checkType(t); err != nil {
			return invalidf("Types: %v", err)
		}
	}
	return nil
}

// setFilter validates types and turns the filter on when there are any.
func (s *Subscription) setFilter(types []string) error {
	if len(types) == 0 {
		return nil
	}
	if err := CheckTypes(types); err != nil {
		return err
	}
	s.filter = &typeFilter{types: append([]string(nil), types...)}
	return nil
}

// has reports whether events of type t pass.
func (f *typeFilter) has(t string) bool {
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
