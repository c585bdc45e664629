package browser

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Path is where the example server and the docs serve the module, and
// Pattern the http.ServeMux pattern for it: mux.Handle(browser.Pattern,
// browser.Handler{}).
const (
	Path    = "/replaybus.js"
	Pattern = "GET " + Path
)

// script is the module as served: replaybus.min.js, built from the
// readable replaybus.js beside it (build/package.json, make browser-build).
//
//go:embed replaybus.min.js
var script []byte

// Script returns a copy of the module as [Handler] serves it (the minified
// build of replaybus.js, an ES module), for an application that bundles it
// or serves it from elsewhere.
func Script() []byte { return bytes.Clone(script) }

// encodings are the module's two representations with their ETags.
type encodings struct {
	plain, gz  []byte
	tag, gzTag string
}

// representations computes the encodings once.
var representations = sync.OnceValue(func() (r encodings) {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = zw.Write(script)
	_ = zw.Close()
	sum := sha256.Sum256(script)
	tag := base64.RawURLEncoding.EncodeToString(sum[:12])
	r.plain, r.gz = script, b.Bytes()
	r.tag, r.gzTag = `"`+tag+`"`, `"`+tag+`-gz"`
	return r
})

// GzipSize returns the size in bytes of the module as [Handler] sends it to
// a client that accepts gzip.
func GzipSize() int { return len(representations().gz) }

// Handler serves the module on GET and HEAD, whatever the path it is
// mounted on: Content-Type text/javascript; charset=utf-8, an ETag with
// Cache-Control: no-cache (If-None-Match → 304), gzip when the request
// accepts it, Range requests as net/http serves them. Any other method is
// a 405 with a JSON body {"code":"method_not_allowed","message":…} and
// Allow: GET, HEAD. The zero value is ready to use and safe for
// concurrent use.
type Handler struct{}

// ServeHTTP answers r; see [Handler].
func (Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		h.Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusMethodNotAllowed)
		enc := json.NewEncoder(w) // a method may hold '&': not escaped, as the other handlers' answers
		enc.SetEscapeHTML(false)
		_ = enc.Encode(map[string]string{"code": "method_not_allowed",
			"message": "method " + strconv.Quote(r.Method) + " not allowed on the module (allowed: GET, HEAD)"})
		return
	}
	rep := representations()
	body, tag := rep.plain, rep.tag
	if acceptsGzip(r.Header.Values("Accept-Encoding")) {
		body, tag = rep.gz, rep.gzTag
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Vary", "Accept-Encoding")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", tag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// acceptsGzip reports whether Accept-Encoding values list gzip (or *)
// with a quality above zero (RFC 9110 §12.5.3).
func acceptsGzip(values []string) bool {
	gz, star := -1.0, -1.0
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(item), ";")
			q := 1.0
			if p := strings.TrimSpace(params); p != "" {
				k, val, ok := strings.Cut(p, "=")
				if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
					continue
				}
				f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
				if err != nil {
					continue
				}
				q = f
			}
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "gzip", "x-gzip":
				gz = q
			case "*":
				star = q
			}
		}
	}
	if gz >= 0 {
		return gz > 0
	}
	return star > 0
}
