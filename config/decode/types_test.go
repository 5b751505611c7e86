package decode_test

import (
	"strconv"
	"strings"
	"time"

	"github.com/relaygate/gateway/config/decode"
)

// A small gateway-like configuration exercising every feature: nested
// lists, rules, a Validator, a union, a string-or-object form, embedded
// structs, pointers, maps, durations and Raw.

type gwConfig struct {
	Binds  []gwBind  `json:"binds,omitempty" cfg:"minItems=1"`
	Config *gwGlobal `json:"config,omitempty"`
}

type gwGlobal struct {
	AdminAddr    string        `json:"adminAddr,omitempty"`
	Workers      int           `json:"workers,omitempty" cfg:"min=1,max=256"`
	DrainTimeout time.Duration `json:"drainTimeout,omitempty" cfg:"min=1s"`
	Tracing      decode.Raw    `json:"tracing,omitempty"`
	Labels       map[string]string
}

type gwBind struct {
	Port      int          `json:"port" cfg:"required,min=1,max=65535"`
	Listeners []gwListener `json:"listeners,omitempty"`
}

type gwListener struct {
	Name      string    `json:"name,omitempty" cfg:"maxLen=20,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	Hostnames []string  `json:"hostnames,omitempty" cfg:"maxItems=2"`
	Protocol  string    `json:"protocol,omitempty" cfg:"enum=HTTP|HTTPS|TCP"`
	TLS       *gwTLS    `json:"tls,omitempty"`
	Routes    []gwRoute `json:"routes,omitempty"`
}

// Validate checks a cross-field rule.
func (l *gwListener) Validate(v *decode.Validation) {
	if l.Protocol == "HTTPS" && l.TLS == nil {
		v.Errorf("tls", "required when protocol is HTTPS")
	}
}

type gwTLS struct {
	Cert string `json:"cert" cfg:"required,minLen=1"`
	Key  string `json:"key" cfg:"required"`
}

type gwMeta struct {
	Description string `json:"description,omitempty" cfg:"maxLen=10"`
}

type gwRoute struct {
	gwMeta
	Name     string      `json:"name,omitempty"`
	Matches  []gwMatch   `json:"matches,omitempty"`
	Backends []gwBackend `json:"backends,omitempty" cfg:"required,maxItems=2"`
	Policies *gwPolicies `json:"policies,omitempty"`
}

type gwMatch struct {
	Path    *gwPathMatch      `json:"path,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Method  string            `json:"method,omitempty" cfg:"enum=GET|POST"`
}

// gwPathMatch is a union: exactly one of its fields.
type gwPathMatch struct {
	Exact      string `json:"exact,omitempty"`
	PathPrefix string `json:"pathPrefix,omitempty"`
	Regex      string `json:"regex,omitempty"`
}

func (m *gwPathMatch) DecodeNode(n *decode.Node) {
	type plain gwPathMatch
	if !n.Decode((*plain)(m)) {
		return
	}
	n.OneOf("exact", "pathPrefix", "regex")
}

// gwBackend is either "host:port" or {host, port, weight}.
type gwBackend struct {
	Host   string `json:"host" cfg:"required"`
	Port   int    `json:"port,omitempty" cfg:"min=1,max=65535"`
	Weight *int   `json:"weight,omitempty" cfg:"min=0,max=100"`
}

func (b *gwBackend) DecodeNode(n *decode.Node) {
	if s, ok := n.String(); ok {
		host, port, found := strings.Cut(s, ":")
		p, err := strconv.Atoi(port)
		if !found || host == "" || err != nil || p < 1 || p > 65535 {
			n.Errorf("invalid backend %q: want host:port", s)
			return
		}
		b.Host, b.Port = host, p
		return
	}
	if !n.Expect(decode.String, decode.Map) {
		return
	}
	type plain gwBackend
	n.Decode((*plain)(b))
}

type gwPolicies struct {
	Timeout time.Duration     `json:"timeout,omitempty"`
	Retries *int              `json:"retries,omitempty" cfg:"min=0,max=10"`
	Ratio   float64           `json:"ratio,omitempty" cfg:"min=0,max=1"`
	Enabled *bool             `json:"enabled,omitempty"`
	Set     map[string]string `json:"set,omitempty" cfg:"maxItems=2"`
	Extra   decode.Raw        `json:"extra,omitempty"`
}
