package config

import (
	"net"
	"strings"

	"github.com/relaygate/gateway/config/decode"
)

// BackendTLS is the backendTLS policy (agentgateway's LocalBackendTLS): the
// gateway speaks TLS to the backend, verifying it against the system roots
// and the destination host unless told otherwise. Its files are read when
// the config is compiled (server), where an unreadable file, bad PEM or a
// key that does not match its certificate is an error naming the field.
//
//	backendTLS: {root: ca.pem, hostname: api.internal, cert: client.pem, key: client.key}
type BackendTLS struct {
	// Cert and Key are PEM files of a client certificate (with its chain)
	// and its key, for backends that require one (mutual TLS); both or
	// neither.
	Cert string `json:"cert,omitempty" cfg:"minLen=1"`
	Key  string `json:"key,omitempty" cfg:"minLen=1"`
	// Root is a PEM file of the CAs that verify the backend, instead of
	// the system's.
	Root string `json:"root,omitempty" cfg:"minLen=1"`
	// Hostname is sent as SNI and verified against the certificate;
	// default: the destination host.
	Hostname string `json:"hostname,omitempty" cfg:"minLen=1,maxLen=253"`
	// Insecure skips every verification (the spec's insecureSkipVerify:
	// All).
	Insecure bool `json:"insecure,omitempty"`
	// InsecureHost verifies the chain but not the name (insecureSkipVerify:
	// Hostname).
	InsecureHost bool `json:"insecureHost,omitempty"`
	// ALPN are the protocols offered; default: the request's HTTP version's
	// (none on a TCP route). On an HTTP backend, h2 in the list makes the
	// backend's requests HTTP/2 (and with http/1.1 too, HTTP/2 unless the
	// backend picks http/1.1); the server checks the list against the
	// backend's kind.
	ALPN []string `json:"alpn,omitempty" cfg:"minItems=1,maxItems=16"`
	// SubjectAltNames are the names of which the certificate must carry
	// one, instead of matching the hostname: DNS names, IP addresses or
	// URIs (spiffe://...), each compared exactly.
	SubjectAltNames []string `json:"subjectAltNames,omitempty" cfg:"minItems=1,maxItems=16"`
	// KeyExchangeGroups are the key exchange groups offered
	// (KeyExchangeGroupNames, as listeners take them); default: Go's.
	KeyExchangeGroups []string    `json:"keyExchangeGroups,omitempty" cfg:"minItems=1,maxItems=4"`
	SPIFFE            Unsupported `json:"spiffe,omitzero"`
}

// The spec's string limits of the lists' items.
const (
	tinyString  = 64  // an ALPN protocol
	shortString = 256 // a subject alternative name
)

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*BackendTLS) FieldRules() {}

// Validate checks the fields that go together, the hostname and the
// lists' items.
func (b *BackendTLS) Validate(v *decode.Validation) {
	switch {
	case b.Cert != "" && b.Key == "":
		v.Errorf("key", "required with cert")
	case b.Key != "" && b.Cert == "":
		v.Errorf("cert", "required with key")
	}
	// The spec: at most one of verifySubjectAltNames and
	// insecureSkipVerify (All or Hostname).
	switch {
	case b.Insecure && b.InsecureHost:
		v.Errorf("insecureHost", "not allowed together with insecure (which skips every verification)")
	case b.Insecure && len(b.SubjectAltNames) > 0:
		v.Errorf("subjectAltNames", "not allowed together with insecure (which skips every verification)")
	case b.InsecureHost && len(b.SubjectAltNames) > 0:
		v.Errorf("subjectAltNames", "not allowed together with insecureHost (subjectAltNames replaces the name check)")
	}
	if b.Hostname != "" && net.ParseIP(b.Hostname) == nil {
		if err := checkDNSName(strings.TrimSuffix(b.Hostname, ".")); err != nil {
			v.Errorf("hostname", "must be a DNS name or an IP address: %v", err)
		}
	}
	// Which protocols an HTTP backend may be offered is the server's to
	// check (it knows the backend's kind); a TCP route offers any.
	seen := map[string]int{}
	for i, p := range b.ALPN {
		at := indexPath("alpn", i)
		switch {
		case p == "" || len(p) > tinyString:
			v.Errorf(at, "must be 1 to %d characters", tinyString)
		case hasControl(p):
			v.Errorf(at, "must not hold control characters or spaces")
		}
		if j, dup := seen[p]; dup {
			v.Errorf(at, "%q is already listed at alpn[%d]", p, j)
		}
		seen[p] = i
	}
	for i, n := range b.SubjectAltNames {
		at := indexPath("subjectAltNames", i)
		switch {
		case n == "" || len(n) > shortString:
			v.Errorf(at, "must be 1 to %d characters", shortString)
		case hasControl(n):
			v.Errorf(at, "must not hold control characters or spaces")
		}
	}
	groups := map[string]int{}
	for i, g := range b.KeyExchangeGroups {
		at := indexPath("keyExchangeGroups", i)
		if !contains(KeyExchangeGroupNames, g) {
			v.Errorf(at, "must be one of: %s", joinOr(KeyExchangeGroupNames))
			continue
		}
		if j, dup := groups[g]; dup {
			v.Errorf(at, "%q is already listed at keyExchangeGroups[%d]", g, j)
		}
		groups[g] = i
	}
}

// hasControl reports whether s holds a control character or a space.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] == 0x7f {
			return true
		}
	}
	return false
}
