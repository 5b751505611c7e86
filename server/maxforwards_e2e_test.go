package server

import (
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestMaxForwards: a TRACE or OPTIONS request with Max-Forwards: 0 is
// answered by the gateway, after the route's policies (an API key refused,
// a CORS preflight, answer first), and never reaches the backend (RFC 9110
// 7.6.2): TRACE with 501 and no echo of the request (its credentials);
// OPTIONS with an empty 200. With more, it goes on with one less; other
// methods' and invalid values go on as they came. Over HTTP/1.1 and HTTP/2.
func TestMaxForwards(t *testing.T) {
	type got struct {
		method, maxForwards string
		present             bool
	}
	var mu sync.Mutex
	var seen []got
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, present := r.Header["Max-Forwards"]
		mu.Lock()
		seen = append(seen, got{r.Method, r.Header.Get("Max-Forwards"), present})
		mu.Unlock()
		w.Write([]byte("from backend")) //nolint:errcheck
	}))
	cfg := oneRoute(up) + "    - matches: [{path: {pathPrefix: /cors}}]\n" +
		"      policies: {cors: {allowOrigins: ['https://a.example'], allowMethods: [GET]}}\n" +
		"      backends: [{host: " + up + "}]\n" +
		"    - matches: [{path: {pathPrefix: /keyed}}]\n" +
		"      policies: {apiKey: {keys: [{key: sekrit123}], location: {header: {name: X-Customer}}}}\n" +
		"      backends: [{host: " + up + "}]\n"
	tg := startGateway(t, cfg, nil)
	tests := []struct {
		desc, method, path string
		headers            []string
		wantBackend        string // the Max-Forwards the backend gets; "" for none
		answered           bool   // by the gateway: the backend gets nothing
		wantBody           []string
		notBody            []string
		wantHeader         [2]string
		status             int // 0: 200
	}{
		{desc: "TRACE 0 answered, nothing echoed", method: "TRACE", path: "/t?access_token=s3cret", status: 501,
			headers:  []string{"Max-Forwards", "0", "X-Trace-Me", "yes", "Authorization", "Bearer s3cret", "Cookie", "sid=s3cret", "X-Authtoken", "s3cret"},
			answered: true, notBody: []string{"s3cret", "X-Trace-Me", "from backend"}},
		{desc: "TRACE 0, the route's API key first", method: "TRACE", path: "/keyed", status: 401,
			headers: []string{"Max-Forwards", "0", "X-Customer", "wrong"}, answered: true, notBody: []string{"wrong", "from backend"}},
		{desc: "TRACE 0 with the route's API key", method: "TRACE", path: "/keyed", status: 501,
			headers: []string{"Max-Forwards", "0", "X-Customer", "sekrit123"}, answered: true, notBody: []string{"sekrit123", "from backend"}},
		{desc: "OPTIONS 0 answered", method: "OPTIONS", path: "/o", headers: []string{"Max-Forwards", "0"}, answered: true, notBody: []string{"from backend"}},
		{desc: "OPTIONS 0, CORS preflight answers", method: "OPTIONS", path: "/cors",
			headers:  []string{"Max-Forwards", "0", "Origin", "https://a.example", "Access-Control-Request-Method", "GET"},
			answered: true, wantHeader: [2]string{"Access-Control-Allow-Origin", "https://a.example"}},
		{desc: "TRACE 5 decremented", method: "TRACE", path: "/t", headers: []string{"Max-Forwards", "5"}, wantBackend: "4", wantBody: []string{"from backend"}},
		{desc: "OPTIONS 1 decremented", method: "OPTIONS", path: "/o", headers: []string{"Max-Forwards", "1"}, wantBackend: "0", wantBody: []string{"from backend"}},
		{desc: "OPTIONS huge capped", method: "OPTIONS", path: "/o", headers: []string{"Max-Forwards", "99999999999999999999999"}, wantBackend: "2147483647"},
		{desc: "GET 0 forwarded as is", method: "GET", path: "/g", headers: []string{"Max-Forwards", "0"}, wantBackend: "0", wantBody: []string{"from backend"}},
		{desc: "OPTIONS invalid forwarded as is", method: "OPTIONS", path: "/o", headers: []string{"Max-Forwards", "-1"}, wantBackend: "-1"},
		{desc: "TRACE without Max-Forwards forwarded", method: "TRACE", path: "/t", wantBody: []string{"from backend"}},
	}
	clients := []struct {
		name, proto string
		c           *http.Client
	}{{"HTTP/1.1", "HTTP/1.1", testClient}, {"HTTP/2", "HTTP/2.0", h2cClient()}}
	for _, cl := range clients {
		for _, tc := range tests {
			t.Run(cl.name+"/"+tc.desc, func(t *testing.T) {
				mu.Lock()
				seen = nil
				mu.Unlock()
				req, err := http.NewRequest(tc.method, tg.url(3000)+tc.path, nil)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i+1 < len(tc.headers); i += 2 {
					req.Header.Set(tc.headers[i], tc.headers[i+1])
				}
				resp, body := doWith(t, cl.c, req)
				if want := max(tc.status, http.StatusOK); resp.StatusCode != want {
					t.Fatalf("status %d: %s; want %d", resp.StatusCode, body, want)
				}
				if resp.Proto != cl.proto {
					t.Fatalf("answered over %s", resp.Proto)
				}
				for _, w := range tc.wantBody {
					if !strings.Contains(body, w) {
						t.Errorf("body lacks %q:\n%s", w, body)
					}
				}
				for _, w := range tc.notBody {
					if strings.Contains(body, w) {
						t.Errorf("body has %q:\n%s", w, body)
					}
				}
				if h := tc.wantHeader; h[0] != "" && resp.Header.Get(h[0]) != h[1] {
					t.Errorf("%s: %q, want %q", h[0], resp.Header.Get(h[0]), h[1])
				}
				// The backend has answered by now, if it was asked.
				mu.Lock()
				defer mu.Unlock()
				switch {
				case tc.answered && len(seen) > 0:
					t.Errorf("forwarded to the backend: %+v", seen)
				case !tc.answered && len(seen) != 1:
					t.Errorf("the backend got %d requests, want 1", len(seen))
				case !tc.answered && (seen[0].method != tc.method || seen[0].maxForwards != tc.wantBackend || seen[0].present != (tc.wantBackend != "")):
					t.Errorf("the backend got %+v, want %s with Max-Forwards %q", seen[0], tc.method, tc.wantBackend)
				}
			})
		}
	}
}
