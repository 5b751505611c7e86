package celrules

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"strings"
)

// peerCertificates is a connection that authenticated its client with a
// certificate (the server's terminated TLS connections).
type peerCertificates interface {
	PeerCertificates() []*x509.Certificate
}

// addClientIdentity adds to source what the client certificate of c, if
// any, says of the client, under agentgateway's names: subjectAltNames
// (URIs, DNS names, IP addresses, emails), issuer, subject, subjectCn,
// spiffeId (the first spiffe:// URI), identity (an Istio-form SPIFFE ID's
// trustDomain, namespace and serviceAccount) and certificate (PEM).
func addClientIdentity(source map[string]any, c net.Conn) {
	pc, ok := c.(peerCertificates)
	if !ok {
		return
	}
	certs := pc.PeerCertificates()
	if len(certs) == 0 {
		return
	}
	cert := certs[0]
	var sans []any
	spiffe := ""
	for _, u := range cert.URIs {
		s := u.String()
		sans = append(sans, s)
		if spiffe == "" && u.Scheme == "spiffe" {
			spiffe = s
		}
	}
	for _, d := range cert.DNSNames {
		sans = append(sans, d)
	}
	for _, ip := range cert.IPAddresses {
		sans = append(sans, ip.String())
	}
	for _, e := range cert.EmailAddresses {
		sans = append(sans, e)
	}
	if sans == nil {
		sans = []any{}
	}
	source["subjectAltNames"] = sans
	source["issuer"] = cert.Issuer.String()
	source["subject"] = cert.Subject.String()
	if cert.Subject.CommonName != "" {
		source["subjectCn"] = cert.Subject.CommonName
	}
	if spiffe != "" {
		source["spiffeId"] = spiffe
		if id, ok := istioIdentity(spiffe); ok {
			source["identity"] = id
		}
	}
	source["certificate"] = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))
}

// istioIdentity reads spiffe://<trust domain>/ns/<namespace>/sa/<account>.
func istioIdentity(id string) (map[string]any, bool) {
	parts := strings.Split(strings.TrimPrefix(id, "spiffe://"), "/")
	if len(parts) != 5 || parts[1] != "ns" || parts[3] != "sa" || parts[0] == "" {
		return nil, false
	}
	return map[string]any{"trustDomain": parts[0], "namespace": parts[2], "serviceAccount": parts[4]}, true
}

// NetworkInput is what networkAuthorization's rules see of a connection:
// `source` (the client's address and port, and its certificate's identity
// on a connection that has one) and `destination` (where the connection
// goes: address, port, hostname, as the caller knows them).
func NetworkInput(c net.Conn, destination map[string]any) Input {
	in := Input{Source: map[string]any{}, Destination: destination}
	addSource(in.Source, c.RemoteAddr(), c)
	return in
}

// addSource fills `source`: the client's address and port (remote), and
// what the certificate of the connection c says of it.
func addSource(source map[string]any, remote net.Addr, c net.Conn) {
	if a, ok := remote.(*net.TCPAddr); ok {
		source["address"] = a.IP.String()
		source["port"] = int64(a.Port)
	}
	addClientIdentity(source, c)
}
