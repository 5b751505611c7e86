package server

import (
	"bytes"
	"html/template"

	"github.com/relaygate/gateway/config"
)

// uiTemplate is the interim admin UI: the running binds, listeners, routes and
// backends, until the full UI lands.
var uiTemplate = template.Must(template.New("ui").Funcs(template.FuncMap{"backendName": uiBackendName}).Parse(`<!doctype html>
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
<td>{{range $r.Matches}}<div>{{if .Method}}<code>{{.Method}}</code> {{end}}{{with .Path}}<code>{{printf "%s" .Value}}</code>{{else}}<code>/</code>{{end}}</div>{{else}}<code>/</code>{{end}}</td>
<td>{{range $r.Backends}}<div><code>{{backendName .}}</code> (weight {{.Weight}})</div>{{else}}none{{end}}</td></tr>
{{end}}</table>{{end}}{{else}}<p>No binds configured.</p>{{end}}
{{with .Backends}}<h2>Named backends</h2><table><tr><th>Name</th><th>Target</th></tr>
{{range .}}<tr><td>{{.Name}}</td><td><code>{{.Host}}</code></td></tr>{{end}}</table>{{end}}{{end}}
</body></html>
`))

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
