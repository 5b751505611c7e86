package server

import (
	"bytes"
	"html/template"

	"github.com/relaygate/gateway/config"
)

// uiTemplate is the interim admin UI: the running binds, listeners, routes and
// backends, until the full UI lands.
var uiTemplate = template.Must(template.New("ui").Funcs(template.FuncMap{"backendName": uiBackendName, "pathMatch": uiPathMatch, "valueMatch": uiValueMatch}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Gateway admin</title>
<style>body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}th{background:#f3f3f3}code{font-size:.95em}</style>
</head><body>
<h1>Gateway admin</h1>
<p><a href="/config_dump">config_dump</a> · <a href="/debug/pprof/">pprof</a></p>
{{with .Reload}}{{if .Err}}<p style="color:#b00020"><strong>The last reload failed</strong> ({{.At.Format "2006-01-02 15:04:05 MST"}}, {{.Source}}); the previous configuration is still running:</p><pre>{{.Err}}</pre>
{{else}}<p>Last reload: {{.At.Format "2006-01-02 15:04:05 MST"}} ({{.Source}}), applied.</p>{{end}}{{end}}
{{with .File}}{{range .Binds}}<h2>Bind port {{.Port}}</h2>
{{range $i, $l := .Listeners}}<h3>Listener {{if $l.Name}}{{$l.Name}}{{else}}#{{$i}}{{end}} ({{if $l.Protocol}}{{$l.Protocol}}{{else}}HTTP{{end}}{{if $l.Hostname}}, {{$l.Hostname}}{{end}})</h3>
<table><tr><th>Route</th><th>Hostnames</th><th>Matches</th><th>Backends</th></tr>
{{range $j, $r := $l.Routes}}<tr><td>{{if $r.Name}}{{$r.Name}}{{else}}#{{$j}}{{end}}</td>
<td>{{range $r.Hostnames}}<code>{{.}}</code> {{else}}any{{end}}</td>
<td>{{range $r.Matches}}<div>{{if .Method}}<code>{{.Method}}</code> {{end}}<code>{{pathMatch .Path}}</code>{{range .Headers}} <code>{{valueMatch "header" .}}</code>{{end}}{{range .Query}} <code>{{valueMatch "query" .}}</code>{{end}}</div>{{else}}<code>{{pathMatch nil}}</code>{{end}}</td>
<td>{{range $r.Backends}}<div><code>{{backendName .}}</code> (weight {{.Weight}})</div>{{else}}none{{end}}</td></tr>
{{end}}</table>{{end}}{{else}}<p>No binds configured.</p>{{end}}
{{with .Backends}}<h2>Named backends</h2><table><tr><th>Name</th><th>Target</th></tr>
{{range .}}<tr><td>{{.Name}}</td><td><code>{{.Host}}</code></td></tr>{{end}}</table>{{end}}{{end}}
</body></html>
`))

// uiPathMatch is a route match's path as the UI shows it, with its kind:
// "exact /hello", "prefix /v1", "regex ^/v[0-9]+/"; no path is every path,
// "prefix /".
func uiPathMatch(p *config.PathMatch) string {
	if p == nil {
		return "prefix /"
	}
	switch p.Kind {
	case config.PathExact:
		return "exact " + p.Value
	case config.PathRegex:
		return "regex " + p.Value
	}
	return "prefix " + p.Value
}

// uiValueMatch is a header (what "header") or query parameter ("query")
// match as the UI shows it: "header x-env: exact prod", "query v: regex
// [0-9]+". The value matched against a name that may carry a credential
// (config.SensitiveHeader) is redacted, as /config_dump redacts it.
func uiValueMatch(what string, m config.ValueMatch) string {
	kind, value := "exact", ""
	switch {
	case m.Value.Regex != nil:
		kind, value = "regex", m.Value.Regex.String()
	case m.Value.Exact != nil:
		value = *m.Value.Exact
	}
	if config.SensitiveHeader(m.Name) {
		value = config.Redacted
	}
	return what + " " + m.Name + ": " + kind + " " + value
}

func uiBackendName(b config.RouteBackend) string {
	switch b.Kind {
	case config.BackendHost:
		return b.Host
	case config.BackendRef:
		return "backend " + b.Backend
	case config.BackendDynamic:
		return "dynamic"
	}
	return "?"
}

// UIPage renders the admin UI page for the running config.
func (g *Gateway) UIPage() ([]byte, error) {
	f := &config.File{}
	if s := g.snap.Load(); s != nil {
		f = s.file
	}
	page := struct {
		File   *config.File
		Reload *ReloadStatus
	}{File: f}
	if st, ok := g.LastReload(); ok {
		page.Reload = &st
	}
	var buf bytes.Buffer
	if err := uiTemplate.Execute(&buf, page); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
