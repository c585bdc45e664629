package jsonmember

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode"
)

// Object is an object of a JSON text that its reader decodes into a Go
// struct: its path ("" the top level, "messages[]" each element of the
// top level's messages, "params.message" …) and the member names the
// struct reads.
type Object struct {
	Path  string
	Names []string
}

// Finding is what Find found: member Name, given twice (First: the name
// it repeats) or, Lone, in another case than the name First that its
// object reads; At is the byte offset of the comma (or brace) before it.
type Finding struct {
	Name, First string
	At          int64
	Lone        bool
}

// Find finds the first member of the JSON text b's top-level object, or of
// an object read, whose name another member of that object has, exactly or
// — in the objects read — in another case, or that names in another case a
// member its object reads: encoding/json matches names regardless of case
// and keeps the last, where a proxy or a log reads the exact name. The
// other objects (metadata, forwardedProps) are the application's data,
// passed on as sent. ok is false when there is none. b is valid JSON
// (the caller checks it first); one pass over its bytes, no tokenizer.
func Find(b []byte, read []Object) (f Finding, ok bool) {
	type level struct {
		obj, key   bool     // an object; its next string is a member name
		fold, live bool     // names fold (a path read); a path read may lie below
		check      bool     // its names are checked: the top level, or fold
		want       []string // the names its struct reads (fold)
		path       string   // its path, while live (interned)
		last       []byte   // the last member name read
		from       int      // its names are names[from:] (up to smallObject)
		seen       map[string][]byte
	}
	const smallObject = 16 // names compared one by one; a map past it
	mapKey := func(fold bool, x []byte) string {
		if fold {
			return foldName(string(x))
		}
		return string(x)
	}
	var (
		stack  []level
		names  [][]byte            // the names of the checked objects open
		buf    []byte              // a path being built
		intern = map[string]bool{} // every prefix of a path read
		paths  = map[string]string{}
	)
	for _, o := range read {
		r := o.Path
		for i := range len(r) + 1 {
			if i == len(r) || r[i] == '.' || r[i] == '[' {
				intern[r[:i]] = true
			}
		}
	}
	open := func(obj bool) {
		l := level{obj: obj, key: obj, from: len(names)}
		if n := len(stack); n == 0 {
			l.live = len(read) > 0
		} else if p := &stack[n-1]; p.live {
			buf = append(buf[:0], p.path...)
			switch {
			case !p.obj:
				buf = append(buf, "[]"...)
			case p.path == "":
				buf = append(buf, p.last...)
			default:
				buf = append(append(buf, '.'), p.last...)
			}
			if intern[string(buf)] {
				var known bool
				l.live = true
				if l.path, known = paths[string(buf)]; !known {
					l.path = string(buf)
					paths[l.path] = l.path
				}
			}
		}
		if i := slices.IndexFunc(read, func(o Object) bool { return o.Path == l.path }); obj && l.live && i >= 0 {
			l.fold, l.want = true, read[i].Names
		}
		l.check = obj && (l.fold || len(stack) == 0)
		stack = append(stack, l)
	}
	comma := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{':
			open(true)
			comma = i
		case '[':
			open(false)
		case '}', ']':
			if n := len(stack); n > 0 {
				names = names[:stack[n-1].from]
				stack = stack[:n-1]
			}
		case ',':
			if n := len(stack); n > 0 && stack[n-1].obj {
				stack[n-1].key, comma = true, i
			}
		case '"':
			j := i + 1
			for j < len(b) && b[j] != '"' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			n := len(stack)
			if n == 0 || !stack[n-1].key || j >= len(b) {
				i = j
				continue
			}
			top := &stack[n-1]
			key := b[i+1 : j]
			top.key, top.last, i = false, key, j
			if !top.check {
				continue
			}
			if bytes.IndexByte(key, '\\') >= 0 {
				var s string
				_ = json.Unmarshal(b[i-len(key)-1:i+1], &s)
				key = []byte(s)
				top.last = key
			}
			var prev []byte
			if top.seen == nil {
				for _, x := range names[top.from:] {
					if bytes.Equal(x, key) || top.fold && bytes.EqualFold(x, key) {
						prev = x
						break
					}
				}
				if prev == nil {
					names = append(names, key)
				}
				if len(names)-top.from > smallObject {
					top.seen = make(map[string][]byte, 2*smallObject)
					for _, x := range names[top.from:] {
						top.seen[mapKey(top.fold, x)] = x
					}
					names = names[:top.from]
				}
			} else if x, dup := top.seen[mapKey(top.fold, key)]; dup {
				prev = x
			} else {
				top.seen[mapKey(top.fold, key)] = key
			}
			if prev != nil {
				return Finding{Name: string(key), First: string(prev), At: int64(comma)}, true
			}
			if top.fold && !slices.Contains(top.want, string(key)) {
				for _, w := range top.want {
					if strings.EqualFold(w, string(key)) {
						return Finding{Name: string(key), First: w, At: int64(comma), Lone: true}, true
					}
				}
			}
		}
	}
	return Finding{}, false
}

// foldName maps every rune of s to the smallest of its case-folding orbit
// (an ASCII letter to its upper case), so that foldName(x) == foldName(y)
// exactly when strings.EqualFold(x, y), the matching of encoding/json.
func foldName(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToUpper(s)
	}
	return strings.Map(func(r rune) rune {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		return m
	}, s)
}
