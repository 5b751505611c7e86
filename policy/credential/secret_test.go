package credential

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/config"
)

// TestSecret: an inline secret is checked when compiled; a file is read on
// first use and again once it changes (after Recheck here, a second in
// service); a file that breaks or goes away keeps the value read before,
// and one never read reports why without showing its content.
func TestSecret(t *testing.T) {
	for _, tc := range []struct {
		inline string
		err    string
	}{
		{"  k1 ", ""},
		{"", "empty"},
		{"a\r\nX-Injected: 1", "control characters"},
	} {
		s, err := NewSecret("Bearer ", config.Secret{Inline: tc.inline})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "Injected") {
				t.Errorf("inline %q: %v, want %q", tc.inline, err, tc.err)
			}
			continue
		}
		if v, err := s.Value(); err != nil || string(v) != "Bearer k1" {
			t.Errorf("inline %q: %q %v", tc.inline, v, err)
		}
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	write := func(content string, at time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	write("file-1\n", now)
	s, err := NewSecret("", config.Secret{File: path})
	if err != nil {
		t.Fatal(err)
	}
	value := func() string {
		t.Helper()
		v, err := s.Value()
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	if got := value(); got != "file-1" {
		t.Fatalf("first read %q", got)
	}
	write("file-2", now.Add(time.Hour))
	if got := value(); got != "file-1" {
		t.Errorf("within the recheck period %q, want the value read", got)
	}
	s.Recheck()
	if got := value(); got != "file-2" {
		t.Errorf("after a change %q, want file-2", got)
	}
	write("bad\x00key", now.Add(2*time.Hour))
	s.Recheck()
	if got := value(); got != "file-2" {
		t.Errorf("a broken file: %q, want the last good value", got)
	}
	os.Remove(path)
	s.Recheck()
	if got := value(); got != "file-2" {
		t.Errorf("a removed file: %q, want the last good value", got)
	}

	never, _ := NewSecret("", config.Secret{File: filepath.Join(dir, "missing")})
	if _, err := never.Value(); err == nil || !strings.Contains(err.Error(), "no such file") || strings.Contains(err.Error(), "relative paths") {
		t.Errorf("a missing file: %v", err)
	}
	relative, _ := NewSecret("", config.Secret{File: "missing/key"})
	if _, err := relative.Value(); err == nil || !strings.Contains(err.Error(), "no such file or directory (relative paths are read from the working directory, ") {
		t.Errorf("a missing file by a relative path: %v", err)
	}
	big := filepath.Join(dir, "big")
	os.WriteFile(big, []byte(strings.Repeat("k", MaxSecretFile+1)), 0o600)
	tooBig, _ := NewSecret("", config.Secret{File: big})
	if _, err := tooBig.Value(); err == nil || !strings.Contains(err.Error(), "too large") || strings.Contains(err.Error(), "kkkk") {
		t.Errorf("a file over the bound: %v", err)
	}
}
