package policy

import (
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
)

// recorder is a test policy that logs its calls into a shared journal.
type recorder struct {
	name    string
	result  Result
	journal *[]string
}

func (r *recorder) OnRequest(*Ctx) Result {
	*r.journal = append(*r.journal, "req:"+r.name)
	return r.result
}

type responseRecorder struct {
	name    string
	journal *[]string
}

func (r *responseRecorder) OnResponse(*Ctx) { *r.journal = append(*r.journal, "resp:"+r.name) }

type bothRecorder struct {
	recorder
	responseRecorder
}

func TestChain(t *testing.T) {
	type add struct {
		kind   Kind
		name   string
		req    bool
		resp   bool
		result Result
	}
	tests := []struct {
		desc        string
		adds        []add
		wantResult  Result
		wantJournal string
	}{
		{
			desc: "request policies run in Order whatever the Add order",
			adds: []add{
				{kind: KindDirectResponse, name: "direct", req: true, result: Done},
				{kind: KindRequestHeaders, name: "reqhdr", req: true},
				{kind: KindCSRF, name: "csrf", req: true},
				{kind: KindCORS, name: "cors", req: true, resp: true},
				{kind: KindURLRewrite, name: "rewrite", req: true},
				{kind: KindResponseHeaders, name: "resphdr", resp: true},
			},
			wantResult:  Done,
			wantJournal: "req:cors req:csrf req:reqhdr req:rewrite req:direct resp:resphdr resp:cors",
		},
		{
			desc: "Done stops the request policies, every response policy runs",
			adds: []add{
				{kind: KindCORS, name: "cors", req: true, resp: true},
				{kind: KindCSRF, name: "csrf", req: true, result: Done},
				{kind: KindRequestHeaders, name: "reqhdr", req: true},
				{kind: KindResponseHeaders, name: "resphdr", resp: true},
			},
			wantResult:  Done,
			wantJournal: "req:cors req:csrf resp:resphdr resp:cors",
		},
		{
			desc: "same kind keeps Add order",
			adds: []add{
				{kind: KindRequestHeaders, name: "first", req: true},
				{kind: KindRequestHeaders, name: "second", req: true},
			},
			wantResult:  Continue,
			wantJournal: "req:first req:second",
		},
		{
			desc:        "empty chain",
			wantResult:  Continue,
			wantJournal: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var journal []string
			b := NewChainBuilder()
			for _, a := range tt.adds {
				switch {
				case a.req && a.resp:
					b.Add(a.kind, &bothRecorder{
						recorder:         recorder{name: a.name, result: a.result, journal: &journal},
						responseRecorder: responseRecorder{name: a.name, journal: &journal},
					})
				case a.req:
					b.Add(a.kind, &recorder{name: a.name, result: a.result, journal: &journal})
				default:
					b.Add(a.kind, &responseRecorder{name: a.name, journal: &journal})
				}
			}
			ch := b.Build()
			c := newCtx("GET", "/")
			if got := ch.RunRequest(c); got != tt.wantResult {
				t.Errorf("RunRequest = %s, want %s", resultName(got), resultName(tt.wantResult))
			}
			ch.RunResponse(c)
			if got := strings.Join(journal, " "); got != tt.wantJournal {
				t.Errorf("calls = %q\nwant    %q", got, tt.wantJournal)
			}
		})
	}
}

// TestChainBefore: a kind the server applies itself (localRateLimit) has
// its place between the chain's policies, Order's: after authorization,
// before remoteRateLimit and everything after it; the two parts run as the
// whole chain does.
func TestChainBefore(t *testing.T) {
	var journal []string
	b := NewChainBuilder()
	for _, a := range []struct {
		kind   Kind
		result Result
	}{
		{KindDirectResponse, Done},
		{KindDelay, Continue},
		{KindRemoteRateLimit, Continue},
		{KindAuthorization, Continue},
		{KindCORS, Continue},
		{KindExtProc, Continue},
	} {
		b.Add(a.kind, &recorder{name: string(a.kind), result: a.result, journal: &journal})
	}
	ch := b.Build()
	tests := []struct {
		kind Kind
		want int
	}{
		{KindCORS, 0},
		{KindLocalRateLimit, 2},
		{KindRemoteRateLimit, 2},
		{KindDirectResponse, 5},
	}
	for _, tt := range tests {
		if got := ch.Before(tt.kind); got != tt.want {
			t.Errorf("Before(%s) = %d, want %d", tt.kind, got, tt.want)
		}
	}
	at := ch.Before(KindLocalRateLimit)
	c := newCtx("GET", "/")
	if got := ch.RunRequestRange(c, 0, at); got != Continue {
		t.Fatalf("first part: %s", resultName(got))
	}
	journal = append(journal, "|")
	if got := ch.RunRequestRange(c, at, len(ch.Request)); got != Done {
		t.Fatalf("second part: %s", resultName(got))
	}
	if got, want := strings.Join(journal, " "), "req:cors req:authorization | req:remoteRateLimit req:extProc req:delay req:directResponse"; got != want {
		t.Fatalf("calls = %q\nwant    %q", got, want)
	}
	if n := (&Chain{}).Before(KindLocalRateLimit); n != 0 {
		t.Errorf("an empty chain: Before = %d", n)
	}
}

func TestChainBuilderPanicsOnProgrammingErrors(t *testing.T) {
	tests := []struct {
		desc string
		kind Kind
		p    any
	}{
		{desc: "unknown kind", kind: Kind("buffer"), p: &recorder{}},
		{desc: "not a policy", kind: KindCSRF, p: "csrf"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("Add did not panic")
				}
			}()
			NewChainBuilder().Add(tt.kind, tt.p)
		})
	}
}

func TestOrderHoldsEveryKindOnce(t *testing.T) {
	kinds := []Kind{KindCORS, KindJWTAuth, KindMCPAuthentication, KindBasicAuth, KindAPIKey, KindExtAuthz, KindAuthorization, KindLocalRateLimit, KindRemoteRateLimit, KindExtProc, KindCSRF, KindTransformations, KindResponseHeaders, KindRequestHeaders, KindURLRewrite, KindDelay, KindRedirect, KindDirectResponse}
	if len(Order) != len(kinds) {
		t.Fatalf("Order has %d kinds, want %d", len(Order), len(kinds))
	}
	for _, k := range kinds {
		n := 0
		for _, o := range Order {
			if o == k {
				n++
			}
		}
		if n != 1 {
			t.Errorf("kind %s appears %d times in Order, want once", k, n)
		}
	}
}

// TestChainEndToEnd runs real policies: a CSRF rejection still gets the CORS
// headers, the way agentgateway lets browsers read rejections.
func TestChainEndToEnd(t *testing.T) {
	cors, err := NewCORS(&config.CORS{AllowOrigins: []string{"https://app.example"}})
	if err != nil {
		t.Fatal(err)
	}
	csrf, err := NewCSRF(&config.CSRF{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := NewHeaderModifier(&config.HeaderModifier{Set: map[string]string{"X-Gateway": "relaygate", "Access-Control-Allow-Origin": "overridden"}})
	if err != nil {
		t.Fatal(err)
	}
	b := NewChainBuilder()
	b.Add(KindResponseHeaders, ResponseHeaders{resp})
	b.Add(KindCSRF, csrf)
	b.Add(KindCORS, cors)
	ch := b.Build()

	tests := []struct {
		desc       string
		method     string
		headers    []string
		wantResult Result
		wantStatus int
		wantLines  []string
	}{
		{
			desc:       "cross-site POST is rejected with CORS headers",
			method:     "POST",
			headers:    []string{"Host: gw.example", "Origin: https://app.example"},
			wantResult: Done, wantStatus: 403,
			wantLines: []string{"Access-Control-Allow-Origin: https://app.example", "Vary: Origin", "X-Gateway: relaygate"},
		},
		{
			desc:       "preflight is answered before CSRF",
			method:     "OPTIONS",
			headers:    []string{"Host: gw.example", "Origin: https://app.example", "Access-Control-Request-Method: POST"},
			wantResult: Done, wantStatus: 200,
			wantLines: []string{"Access-Control-Allow-Origin: overridden", "Vary: Origin", "X-Gateway: relaygate"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			c := newCtx(tt.method, "/mcp", tt.headers...)
			if got := ch.RunRequest(c); got != tt.wantResult {
				t.Fatalf("RunRequest = %s, want %s", resultName(got), resultName(tt.wantResult))
			}
			ch.RunResponse(c)
			if c.Fast.Response.StatusCode() != tt.wantStatus {
				t.Errorf("status = %d, want %d", c.Fast.Response.StatusCode(), tt.wantStatus)
			}
			got := responseLines(t, &c.Fast.Response.Header, "Access-Control-Allow-Origin", "Vary", "X-Gateway")
			if !equalLines(got, tt.wantLines) {
				t.Errorf("headers = %q, want %q", got, tt.wantLines)
			}
		})
	}
}

func TestChainZeroAllocs(t *testing.T) {
	cors, err := NewCORS(&config.CORS{AllowOrigins: []string{"https://app.example"}, ExposeHeaders: []string{"Mcp-Session-Id"}})
	if err != nil {
		t.Fatal(err)
	}
	csrf, err := NewCSRF(&config.CSRF{})
	if err != nil {
		t.Fatal(err)
	}
	hm, err := NewHeaderModifier(&config.HeaderModifier{Set: map[string]string{"X-Env": "prod"}})
	if err != nil {
		t.Fatal(err)
	}
	b := NewChainBuilder()
	b.Add(KindCORS, cors)
	b.Add(KindCSRF, csrf)
	b.Add(KindRequestHeaders, RequestHeaders{hm})
	b.Add(KindResponseHeaders, ResponseHeaders{hm})
	ch := b.Build()
	c := newCtx("POST", "/mcp", "Host: gw.example", "Origin: https://app.example", "Sec-Fetch-Site: cross-site")
	allocs := testing.AllocsPerRun(100, func() {
		c.CORS = nil
		c.Fast.Response.Reset()
		ch.RunRequest(c)
		ch.RunResponse(c)
	})
	if allocs != 0 {
		t.Errorf("allocations per request = %v, want 0", allocs)
	}
}
