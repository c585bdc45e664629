package eventbus

import (
	"mime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"
)

// Byte payloads. An event's payload is JSON unless it was published with
// [Bus.PublishBytes] and a media type other than application/json: then
// Data holds the bytes as published and the event carries its media type.
//
// The media type does not live in a string field of Event or of the
// record: JSON events, the common case, would pay 16 bytes each for an
// empty string (Event is 128 bytes, a size class). It is interned instead:
// an Event holds a 4-byte index into the process's table (in the padding
// after Replay, so Event stays 128 bytes), and a record holds it in its
// extension (queue.Ext, which JSON records without an origin do not
// have). Index 0 is JSON.

// contentTypeJSON is the media type of every event whose payload is JSON:
// what [Event.ContentType] returns for an event published with
// [Bus.Publish] or [Bus.PublishJSON], and the media type under which
// [Bus.PublishBytes] validates its payload as JSON instead.
const contentTypeJSON = "application/json"

// Bounds of the media type table (one per process, shared by every bus).
const (
	// maxMediaTypeLen bounds one media type, parameters included (RFC
	// 6838 §4.2 bounds type and subtype names to 127 characters each).
	maxMediaTypeLen = 255
	// maxMediaTypes bounds the distinct media types a process interns; an
	// entry is never removed (Events hold bare indices), so the table is at
	// most 4,096 × 255 bytes.
	maxMediaTypes = 4096
)

// mediaTab is the process's interned media types: ids maps a canonical
// media type to its index (1 … maxMediaTypes), and up to maxMediaTypes
// other spellings (JSON ones to 0); names[i] is index i's type. An index
// is handed out only after its name is stored, so a reader that holds an
// index finds the name.
var mediaTab struct {
	mu      sync.Mutex // serialises additions
	n       uint32     // indices handed out; under mu
	aliases int        // other spellings stored in ids; under mu
	ids     *xsync.MapOf[string, uint32]
	names   [maxMediaTypes + 1]atomic.Pointer[string]
}

// octetStream is the media type interned first, at startup, so that it
// always resolves: the fallback of a decoder (adapters/nats) whose process
// already knows 4,096 media types when an event of a new one arrives.
const octetStream = "application/octet-stream"

func init() {
	mediaTab.ids = xsync.NewMapOf[string, uint32]()
	if _, err := internMedia(octetStream); err != nil {
		panic(err) // a constant, well-formed media type into an empty table
	}
}

// mediaName returns index i's media type: contentTypeJSON for 0.
func mediaName(i uint32) string {
	if i == 0 || i > maxMediaTypes {
		return contentTypeJSON
	}
	if p := mediaTab.names[i].Load(); p != nil {
		return *p
	}
	return contentTypeJSON
}

// internMedia checks contentType and returns its index: 0 for JSON
// (application/json, with any parameters), else the index of its
// canonical form (mime.FormatMediaType of mime.ParseMediaType: type,
// subtype and parameter names in lower case). Errors (ErrInvalid, naming
// the value): empty, malformed (not type/subtype, bad parameters),
// longer than 255 bytes, or a new type when the process already knows
// 4,096. Safe for concurrent use; a known type costs one map lookup.
func internMedia(contentType string) (uint32, error) {
	if id, ok := mediaTab.ids.Load(contentType); ok {
		return id, nil
	}
	if strings.TrimSpace(contentType) == "" {
		return 0, invalidf("media type %q is empty (want type/subtype, e.g. application/octet-stream)", contentType)
	}
	if len(contentType) > maxMediaTypeLen {
		return 0, invalidf("media type %.60q… is %d bytes long (at most %d)", contentType, len(contentType), maxMediaTypeLen)
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return 0, invalidf("malformed media type %q: %v", contentType, err)
	}
	if typ, sub, ok := strings.Cut(mt, "/"); !ok || typ == "" || sub == "" || strings.Contains(mt, "*") {
		return 0, invalidf("malformed media type %q: want type/subtype, e.g. application/octet-stream", contentType)
	}
	var canon string
	if mt != contentTypeJSON {
		if canon = mime.FormatMediaType(mt, params); canon == "" || len(canon) > maxMediaTypeLen {
			return 0, invalidf("malformed media type %q", contentType)
		}
	}
	mediaTab.mu.Lock()
	defer mediaTab.mu.Unlock()
	var id uint32 // 0: JSON
	if canon != "" {
		var ok bool
		if id, ok = mediaTab.ids.Load(canon); !ok {
			if mediaTab.n == maxMediaTypes {
				return 0, invalidf("media type %q: this process already knows %d distinct media types (the limit)", contentType, maxMediaTypes)
			}
			mediaTab.n++
			id = mediaTab.n
			mediaTab.names[id].Store(&canon)
			mediaTab.ids.Store(canon, id)
		}
	}
	if canon != contentType && mediaTab.aliases < maxMediaTypes {
		// Another spelling (or a JSON one) maps to the same index, so the
		// next lookup of it is one map load; at most 4,096 spellings are
		// kept, beyond that they are parsed each time.
		mediaTab.aliases++
		mediaTab.ids.Store(contentType, id)
	}
	return id, nil
}

// ContentType returns the media type of e's payload in canonical form:
// "application/json" unless it was published with [Bus.PublishBytes] under
// another type.
func (e Event) ContentType() string { return mediaName(e.media) }

// IsJSON reports whether e's Data is JSON.
func (e Event) IsJSON() bool { return e.media == 0 }

// WithContentType returns a copy of e whose Data is of media type
// contentType, for a decoder that rebuilds a received event. It does not
// validate Data. Errors: ErrInvalid for a media type PublishBytes refuses;
// application/octet-stream never fails. Safe for concurrent use.
func (e Event) WithContentType(contentType string) (Event, error) {
	id, err := internMedia(contentType)
	if err != nil {
		return Event{}, err
	}
	e.media = id
	return e, nil
}
