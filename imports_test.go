package gateway_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// layers lists the packages by layer; a package may import only packages of
// its own or a lower layer (docs/ARCHITECTURE.md, "Packages and the direction
// of imports").
var layers = []struct {
	prefix string
	layer  int
}{
	{"github.com/relaygate/gateway/pool", 0},
	{"github.com/relaygate/gateway/config", 1},
	{"github.com/relaygate/gateway/codec", 1},
	{"github.com/relaygate/gateway/policy", 2},
	{"github.com/relaygate/gateway/backend", 3},
	{"github.com/relaygate/gateway/server", 4},
	{"github.com/relaygate/gateway/examples", 4},
	{"github.com/relaygate/gateway/cmd", 5},
	{"github.com/relaygate/gateway/bench", 5},
}

func layerOf(pkg string) (int, bool) {
	best, layer := "", 0
	for _, l := range layers {
		if (pkg == l.prefix || strings.HasPrefix(pkg, l.prefix+"/")) && len(l.prefix) > len(best) {
			best, layer = l.prefix, l.layer
		}
	}
	return layer, best != ""
}

// TestImportDirection fails when a package imports one from a higher layer.
func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		from, ok := layerOf(p.ImportPath)
		if !ok {
			continue
		}
		checked++
		for _, imp := range p.Imports {
			to, ok := layerOf(imp)
			if ok && to > from {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must point down", p.ImportPath, from, imp, to)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("only %d packages checked", checked)
	}
}
