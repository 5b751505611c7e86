package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/relaygate/gateway/config/decode"
)

// Environment variables that win over the `config:` section, as in
// agentgateway (crates/agentgateway/src/config.rs). Parse reads them with
// the lookup it expands references with, so that a reload sees them too and
// the running config (and /config_dump) holds what is in effect. An empty
// variable counts as unset. An invalid value is an error naming the
// variable, never quoting the value: endpoints, headers and keys hold
// credentials. (The side servers' addresses and the drain deadlines are
// read by cmd/gateway, which applies them.)
//
//   - OTLP_ENDPOINT, else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
//     OTEL_EXPORTER_OTLP_ENDPOINT: config.tracing.otlpEndpoint;
//   - OTLP_HEADERS, else OTEL_EXPORTER_OTLP_TRACES_HEADERS, else
//     OTEL_EXPORTER_OTLP_HEADERS: headers set over config.tracing.headers
//     (a JSON object, or key=value pairs separated by commas);
//   - OTLP_PROTOCOL, else OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
//     OTEL_EXPORTER_OTLP_PROTOCOL: config.tracing.otlpProtocol (grpc, or
//     http and http/protobuf for http);
//
// the three apply only when the file has config.tracing, which they
// complete: `tracing: {}` takes its endpoint from the environment;
//
//   - SESSION_KEY: config.session.key;
//   - WORKER_THREADS: config.workerThreads;
//   - IPV6_ENABLED (true or false): config.enableIpv6.

// The tracing variables, most specific first.
var (
	tracingEndpointEnv = []string{"OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"}
	tracingHeadersEnv  = []string{"OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"}
	tracingProtocolEnv = []string{"OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"}
)

// EnvError is an invalid value of an environment variable.
type EnvError struct {
	Name string // the variable
	Msg  string
}

func (e *EnvError) Error() string { return "environment variable " + e.Name + ": " + e.Msg }

// applyEnv sets the config section's settings that an environment
// variable overrides, then checks the tracing endpoint, which either may
// give. prior are the errors decoding found: a field that failed there is
// not reported again.
func (f *File) applyEnv(lookup func(string) (string, bool), prior Errors) Errors {
	var errs Errors
	env := func(name string) string {
		if lookup == nil {
			return ""
		}
		v, _ := lookup(name)
		return v
	}
	bad := func(name, format string, args ...any) {
		errs = append(errs, &EnvError{Name: name, Msg: fmt.Sprintf(format, args...)})
	}
	settings := func() *Settings {
		if f.Config == nil {
			f.Config = &Settings{}
		}
		return f.Config
	}
	if v := env("SESSION_KEY"); v != "" {
		if key, err := parseSessionKey(strings.TrimSpace(v)); err != nil {
			bad("SESSION_KEY", "%v", err)
		} else {
			settings().Session = &SessionSettings{Key: key}
		}
	}
	if v := env("WORKER_THREADS"); v != "" {
		if w, err := parseWorkerThreads(strings.TrimSpace(v)); err != nil {
			bad("WORKER_THREADS", "%v", err)
		} else {
			settings().WorkerThreads = &w
		}
	}
	if v := env("IPV6_ENABLED"); v != "" {
		switch on, err := strconv.ParseBool(strings.TrimSpace(v)); {
		case err != nil:
			bad("IPV6_ENABLED", "must be true or false")
		default:
			settings().EnableIPv6 = &on
		}
	}
	if f.Config != nil && f.Config.Tracing != nil {
		f.Config.Tracing.applyEnv(env, bad, prior, &errs)
	}
	return errs
}

// applyEnv completes config.tracing from the environment (File.applyEnv)
// and checks the endpoint in effect.
func (t *Tracing) applyEnv(env func(string) string, bad func(name, format string, args ...any), prior Errors, errs *Errors) {
	const field = "config.tracing.otlpEndpoint"
	if name, v := firstEnv(env, tracingHeadersEnv); name != "" {
		headers, err := parseOTLPHeaders(v, strings.HasPrefix(name, "OTEL_"))
		if err != nil {
			bad(name, "%v", err)
		}
		for k, val := range headers {
			if t.Headers == nil {
				t.Headers = map[string]SecretString{}
			}
			t.Headers[k] = SecretString(val)
		}
	}
	if name, v := firstEnv(env, tracingProtocolEnv); name != "" {
		switch strings.ToLower(strings.Trim(strings.TrimSpace(v), `"`)) {
		case "grpc":
			t.OTLPProtocol = "grpc"
		case "http", "http/protobuf":
			t.OTLPProtocol = "http"
		case "http/json":
			bad(name, "http/json is not supported; use grpc or http/protobuf")
		default:
			bad(name, "must be grpc or http/protobuf (or http)")
		}
	}
	endpoint, source := t.OTLPEndpoint, ""
	if name, v := firstEnv(env, tracingEndpointEnv); name != "" {
		endpoint, source = strings.TrimSpace(v), name
	}
	if endpoint == "" {
		for _, e := range prior {
			if fe, ok := e.(*decode.FieldError); ok && strings.HasPrefix(fe.Path, field) {
				return // a value that did not decode: reported already
			}
		}
		*errs = append(*errs, &decode.FieldError{Path: field, Msg: "required (or set " + strings.Join(tracingEndpointEnv, ", ") + ")"})
		return
	}
	u, ok := otlpEndpointURL(endpoint)
	switch {
	case !ok && source != "":
		bad(source, "must be an http:// or https:// URL, or host:port (https)")
	case !ok:
		*errs = append(*errs, &decode.FieldError{Path: field, Msg: "must be an http:// or https:// URL, or host:port (https)"})
	default:
		t.OTLPEndpoint = u
	}
}

// otlpEndpointURL is the collector's URL: endpoint, with https:// before
// it when it has no scheme (collector:4317), as agentgateway's validate_uri
// makes it. ok is false for a scheme other than http or https, or no host.
func otlpEndpointURL(endpoint string) (string, bool) {
	if !strings.Contains(endpoint, "://") {
		endpoint = "https://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", false
	}
	return endpoint, true
}

// firstEnv returns the first of names that is set (not empty), with its
// value.
func firstEnv(env func(string) string, names []string) (name, value string) {
	for _, n := range names {
		if v := env(n); v != "" {
			return n, v
		}
	}
	return "", ""
}

// parseOTLPHeaders reads headers given as a JSON object of strings or as
// key=value pairs separated by commas (agentgateway's parse_otlp_headers),
// their values percent-decoded when percentEncoded (the OTEL_ variables).
func parseOTLPHeaders(s string, percentEncoded bool) (map[string]string, error) {
	s = strings.TrimSpace(s)
	headers := map[string]string{}
	if strings.HasPrefix(s, "{") {
		if err := json.Unmarshal([]byte(s), &headers); err != nil {
			return nil, fmt.Errorf("not a JSON object of strings")
		}
	} else {
		for pair := range strings.SplitSeq(s, ",") {
			pair = strings.TrimSpace(pair)
			if pair == "" {
				continue
			}
			k, v, ok := strings.Cut(pair, "=")
			if !ok {
				return nil, fmt.Errorf("expected key=value pairs separated by commas, or a JSON object")
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if percentEncoded {
				// The OpenTelemetry variables' values are percent-encoded
				// (W3C Baggage's format, as the SDKs read them):
				// "Authorization=Basic%20a2V5" is "Basic a2V5".
				var err error
				if v, err = url.PathUnescape(v); err != nil {
					return nil, fmt.Errorf("the value of header %q is not percent-encoded (a %% not followed by two hex digits)", k)
				}
			}
			headers[k] = v
		}
	}
	if len(headers) > 32 {
		return nil, fmt.Errorf("at most 32 headers")
	}
	for k, v := range headers {
		if !validHeaderName(k) {
			return nil, fmt.Errorf("invalid header name %q", k)
		}
		if !validHeaderValue(v) {
			return nil, fmt.Errorf("the value of header %q holds a control character or a byte outside visible ASCII", k)
		}
	}
	return headers, nil
}
