package durable

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, path string
		want          bool
	}{
		{"events/*", "events/a", true},
		{"events/*", "events/a/b", false},
		{"events/*", "events", false},
		{"events/**", "events", true},
		{"events/**", "events/a/b", true},
		{"**/x", "a/b/x", true},
		{"**/x", "x", true},
		{"a/*/c", "a/b/c", true},
		{"a/*/c", "a/b/d", false},
		{"manual/a", "manual/a", true},
	} {
		assert.Equal(t, c.want, globMatch(c.pattern, c.path), "%q ~ %q", c.pattern, c.path)
	}
}

// Webhook URLs that could reach a private network are refused (PROTOCOL.md
// §12.8); plain http only for localhost and 127.0.0.x.
func TestCheckWebhookURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://hooks.example.com/x": true,
		"http://127.0.0.1:8080/hook":  true,
		"http://localhost/hook":       true,
		"http://10.0.0.1/hook":        false,
		"https://10.0.0.1/hook":       false,
		"https://192.168.1.1/":        false,
		"https://127.0.0.1/":          false,
		"https://[::1]/":              false,
		"https://169.254.169.254/":    false,
		"http://hooks.example.com/":   false,
		"ftp://hooks.example.com/":    false,
		"not a url":                   false,
	} {
		err := checkWebhookURL(raw)
		if ok {
			assert.NoError(t, err, raw)
		} else {
			assert.Error(t, err, raw)
		}
	}
}
