package admin

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
)

// adminHandler routes the admin server. The pprof handlers are registered
// on this mux; the servers never serve http.DefaultServeMux.
func adminHandler(opts Options) http.Handler {
	mux := http.NewServeMux()
	var links []string
	if opts.UIPage != nil {
		mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
			target := "/ui/"
			if r.URL.RawQuery != "" {
				target += "?" + r.URL.RawQuery
			}
			http.Redirect(w, r, target, http.StatusMovedPermanently)
		})
		mux.Handle("GET /ui/{$}", bytesHandler("text/html; charset=utf-8", opts.UIPage))
		links = append(links, "/ui/")
	}
	if opts.ConfigDump != nil {
		mux.Handle("GET /config_dump", bytesHandler("application/json", opts.ConfigDump))
		links = append(links, "/config_dump")
	}
	if opts.LLMProviders != nil {
		mux.Handle("GET /llm/providers", bytesHandler("application/json", opts.LLMProviders))
		links = append(links, "/llm/providers")
	}
	if opts.EvalCEL != nil {
		mux.Handle("POST /cel", celHandler(opts.EvalCEL))
	}
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.Handle("GET /debug/pprof/cmdline", cmdlineHandler(opts.Cmdline))
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	links = append(links, "/debug/pprof/")

	index := indexPage(links)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		writeBody(w, http.StatusOK, "text/html; charset=utf-8", index)
	})
	return mux
}

// maxCELSample bounds POST /cel's body.
const maxCELSample = 64 << 10

// celHandler evaluates an expression against a sample request: 200 with
// {"result": value}, or 400 with {"error": why}.
func celHandler(eval func([]byte) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxCELSample+1))
		if err == nil && len(body) > maxCELSample {
			err = fmt.Errorf("the sample is larger than %d bytes", maxCELSample)
		}
		var result any
		if err == nil {
			result, err = eval(body)
		}
		status, out := http.StatusOK, map[string]any{"result": result}
		if err != nil {
			status, out = http.StatusBadRequest, map[string]any{"error": err.Error()}
		}
		b, _ := json.Marshal(out)
		writeBody(w, status, "application/json", append(b, '\n'))
	})
}

// cmdlineHandler serves the command line as pprof's Cmdline does (the
// arguments separated by NUL bytes), but the one given (Options.Cmdline):
// pprof's shows os.Args whole, an inline config (-c) with its secrets
// included.
func cmdlineHandler(args []string) http.Handler {
	if args == nil {
		args = os.Args[:min(len(os.Args), 1)]
	}
	body := []byte(strings.Join(args, "\x00"))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeBody(w, http.StatusOK, "text/plain; charset=utf-8", body)
	})
}

// indexPage is the small HTML page served at /.
func indexPage(links []string) []byte {
	var b strings.Builder
	b.WriteString("<!doctype html>\n<html><head><title>gateway admin</title></head><body>\n<h1>gateway admin</h1>\n<ul>\n")
	for _, l := range links {
		e := html.EscapeString(l)
		b.WriteString(`<li><a href="` + e + `">` + e + "</a></li>\n")
	}
	b.WriteString("</ul>\n</body></html>\n")
	return []byte(b.String())
}

// bytesHandler serves what produce returns with the given content type, or
// a 500 with the error text.
func bytesHandler(contentType string, produce func() ([]byte, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := produce()
		if err != nil {
			writeBody(w, http.StatusInternalServerError, "text/plain; charset=utf-8", []byte(err.Error()+"\n"))
			return
		}
		writeBody(w, http.StatusOK, contentType, body)
	})
}

// writeBody writes a complete, uncached response.
func writeBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
