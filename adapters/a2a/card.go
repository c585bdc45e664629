package a2a

import "encoding/json"

// Version is an A2A protocol version this package speaks.
type Version string

// The versions: 1.0 (the SDK's own) and 0.3 (its compatibility layer).
const (
	V1  Version = "1.0"
	V03 Version = "0.3"
)

// Skill is one skill of an agent card.
type Skill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
}

// Card is an agent card (served at /.well-known/agent-card.json): an
// agent that streams (capabilities.streaming) over JSON-RPC at URL.
type Card struct {
	Name, Description, Version string
	// URL is the JSON-RPC endpoint.
	URL    string
	Skills []Skill
	// Versions are the protocol versions the endpoint speaks; nil means
	// both. With V1 the card lists supportedInterfaces (a 1.0 client picks
	// the 1.0 one); with V03 it also carries the 0.3 card's url,
	// protocolVersion and preferredTransport.
	Versions []Version
}

// MarshalJSON writes the card: one document that 1.0 and 0.3 clients
// read alike when both versions are listed.
func (c Card) MarshalJSON() ([]byte, error) {
	versions := c.Versions
	if versions == nil {
		versions = []Version{V1, V03}
	}
	skills := c.Skills
	if skills == nil {
		skills = []Skill{}
	}
	for i := range skills {
		if skills[i].Tags == nil {
			skills[i].Tags = []string{}
		}
	}
	type iface struct {
		URL             string `json:"url"`
		ProtocolBinding string `json:"protocolBinding"`
		ProtocolVersion string `json:"protocolVersion"`
	}
	out := struct {
		Name                string   `json:"name"`
		Description         string   `json:"description"`
		Version             string   `json:"version"`
		SupportedInterfaces []iface  `json:"supportedInterfaces,omitempty"`
		URL                 string   `json:"url,omitempty"`
		ProtocolVersion     string   `json:"protocolVersion,omitempty"`
		PreferredTransport  string   `json:"preferredTransport,omitempty"`
		Capabilities        any      `json:"capabilities"`
		DefaultInputModes   []string `json:"defaultInputModes"`
		DefaultOutputModes  []string `json:"defaultOutputModes"`
		Skills              []Skill  `json:"skills"`
	}{
		Name: c.Name, Description: c.Description, Version: c.Version,
		Capabilities:       map[string]bool{"streaming": true, "pushNotifications": false},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills:             skills,
	}
	for _, v := range versions {
		switch v {
		case V1:
			out.SupportedInterfaces = append(out.SupportedInterfaces, iface{c.URL, "JSONRPC", "1.0"})
		case V03:
			out.URL, out.ProtocolVersion, out.PreferredTransport = c.URL, "0.3.0", "JSONRPC"
		}
	}
	if out.SupportedInterfaces != nil && out.URL != "" {
		out.SupportedInterfaces = append(out.SupportedInterfaces, iface{c.URL, "JSONRPC", "0.3"})
	}
	return json.Marshal(out)
}
