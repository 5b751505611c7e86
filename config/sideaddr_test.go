package config

import (
	"strings"
	"testing"
)

// TestListenAddrsOverlap: two listen addresses clash when they are one
// unix socket, or one port (not 0) on hosts that share an address.
func TestListenAddrsOverlap(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:80", "127.0.0.1:80", true},
		{"127.0.0.1:80", "127.0.0.1:81", false},
		{"127.0.0.1:0", "127.0.0.1:0", false},
		{"0.0.0.0:80", "127.0.0.1:80", true},
		{"0.0.0.0:80", "[::1]:80", false},
		{"[::]:80", "[::1]:80", true},
		{":80", "10.0.0.1:80", true},
		{"localhost:80", "127.0.0.1:80", true},
		{"localhost:80", "[::1]:80", true},
		{"LOCALHOST:80", "10.0.0.1:80", false},
		{"127.0.0.1:80", "127.0.0.2:80", false},
		{"[::ffff:127.0.0.1]:80", "127.0.0.1:80", true},
		{"gw.example:80", "GW.example:80", true},
		{"gw.example:80", "0.0.0.0:80", true},
		{"gw.example:80", "127.0.0.1:80", false},
		{"127.0.0.1:080", "127.0.0.1:80", true},
		{"unix:/run/a", "unix:/run/a", true},
		{"unix:/run/a", "unix:/run/b", false},
		{"unix:/run/a", "0.0.0.0:80", false},
		{"off", "off", false},
		{"", "", false},
	} {
		if got := listenAddrsOverlap(tc.a, tc.b); got != tc.want {
			t.Errorf("listenAddrsOverlap(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := listenAddrsOverlap(tc.b, tc.a); got != tc.want {
			t.Errorf("listenAddrsOverlap(%q, %q) = %v, want %v", tc.b, tc.a, got, tc.want)
		}
	}
}

// TestCheckSideAddrs: side servers on one address, and a bind on a side
// server's port, are refused with the field to change; internal binds and
// distinct addresses pass.
func TestCheckSideAddrs(t *testing.T) {
	side := func(admin, stats, readiness SideAddr) []SideAddr { return []SideAddr{admin, stats, readiness} }
	file := func(field, addr string) SideAddr { return SideAddr{Name: "config." + field, Addr: addr, InFile: true} }
	env := func(name, addr string) SideAddr { return SideAddr{Name: name, Addr: addr} }
	def := func(field, addr string) SideAddr { return SideAddr{Name: "config." + field, Addr: addr, Default: true} }
	defaults := side(def("adminAddr", "localhost:15000"), def("statsAddr", "0.0.0.0:15020"), def("readinessAddr", "0.0.0.0:15021"))
	for _, tc := range []struct {
		desc  string
		yaml  string
		addrs []SideAddr
		want  []string
	}{
		{"defaults", "binds: [{port: 8080, listeners: []}]", defaults, nil},
		{"three on one address", "config: {adminAddr: '127.0.0.1:9000', statsAddr: '127.0.0.1:9000', readinessAddr: '127.0.0.1:9000'}\nbinds: []",
			side(file("adminAddr", "127.0.0.1:9000"), file("statsAddr", "127.0.0.1:9000"), file("readinessAddr", "127.0.0.1:9000")),
			[]string{`config.statsAddr: address "127.0.0.1:9000" is also used by config.adminAddr (127.0.0.1:9000) (line 1:`, `config.readinessAddr: address "127.0.0.1:9000" is also used by config.adminAddr (127.0.0.1:9000) (line 1:`}},
		{"from the environment", "binds: []", side(def("adminAddr", "localhost:15000"), env("STATS_ADDR", "127.0.0.1:9000"), env("READINESS_ADDR", "0.0.0.0:9000")),
			[]string{`READINESS_ADDR: address "0.0.0.0:9000" is also used by STATS_ADDR (127.0.0.1:9000)`}},
		{"a set one on a default", "config: {statsAddr: '127.0.0.1:15021'}\nbinds: []", side(def("adminAddr", "localhost:15000"), file("statsAddr", "127.0.0.1:15021"), def("readinessAddr", "0.0.0.0:15021")),
			[]string{`config.statsAddr: address "127.0.0.1:15021" is also used by config.readinessAddr (default 0.0.0.0:15021) (line 1:`}},
		{"a bind on a side port", "binds:\n- port: 8080\n  listeners: []\n- port: 9000\n  listeners: []\n- port: 15020\n  listeners: []\n",
			side(file("adminAddr", "127.0.0.1:9000"), def("statsAddr", "0.0.0.0:15020"), def("readinessAddr", "0.0.0.0:15021")),
			[]string{`binds[1].port: port 9000 is also used by config.adminAddr (127.0.0.1:9000) (line 4:9)`, `binds[2].port: port 15020 is also used by config.statsAddr (default 0.0.0.0:15020) (line 6:9)`}},
		{"an llm section on a side port", "llm: {port: 15021, models: [{name: m, provider: openAI}]}", defaults,
			[]string{`llm.port: port 15021 is also used by config.readinessAddr (default 0.0.0.0:15021) (line 1:13)`}},
		{"an internal bind opens no socket", "binds: [{port: 15020, mode: internal, listeners: []}]", defaults, nil},
		{"off and port 0", "binds: []", side(file("adminAddr", "off"), file("statsAddr", "127.0.0.1:0"), file("readinessAddr", "127.0.0.1:0")), nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f, err := Parse([]byte(tc.yaml), noEnv)
			if err != nil {
				t.Fatal(err)
			}
			errs := f.CheckSideAddrs(tc.addrs)
			if len(errs) != len(tc.want) {
				t.Fatalf("%d errors, want %d:\n%v", len(errs), len(tc.want), errs)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(errs[i].Error(), w) {
					t.Errorf("error %d: %v\nwant %s...", i, errs[i], w)
				}
			}
		})
	}
}
