package serve

import (
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/internal/textutil"
)

// CheckJSONMedia refuses, before a JSON body route reads r's body, what it
// cannot read as sent: a Content-Encoding other than identity (415
// unsupported_content_encoding: read as is it would fail as invalid JSON)
// and a body whose Content-Type is not application/json (415
// unsupported_media_type: a page's form cannot post one cross-site without
// a preflight). A request without a body passes whatever its Content-Type.
// The cancel route and the frontend handlers share it.
func CheckJSONMedia(r *http.Request) error {
	vals := r.Header.Values("Content-Encoding")
	for _, v := range vals {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return &resume.StatusError{Status: http.StatusUnsupportedMediaType, Code: resume.CodeUnsupportedEncoding,
					Message: fmt.Sprintf("Content-Encoding %s is not supported (send the body uncompressed)", textutil.Quote(strings.Join(vals, ", "), 64)),
					Header:  http.Header{"Accept-Encoding": {"identity"}}}
			}
		}
	}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	// A body of unknown length (chunked) is a body: it must be JSON too.
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return &resume.StatusError{Status: http.StatusUnsupportedMediaType, Code: resume.CodeUnsupportedMediaType,
			Message: fmt.Sprintf("Content-Type %s is not supported (want application/json)", textutil.Quote(ct, 64)),
			Header:  http.Header{"Accept": {"application/json"}}}
	}
	return nil
}
