package config

import (
	"os"
	"strconv"
	"strings"
)

// ExpandEnv replaces $VAR, ${VAR} and ${VAR:-default} in the raw file text with
// values from lookup, as agentgateway does before parsing. "$$" is a literal "$";
// a "$" not followed by a name or "{" is kept; whole-line comments are left
// alone. A variable that is not defined
// (and has no default) is an error naming its line; all such errors are returned.
func ExpandEnv(text []byte, lookup func(string) (string, bool)) ([]byte, []error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if !strings.ContainsRune(string(text), '$') {
		return text, nil
	}
	var (
		out  strings.Builder
		errs []error
		line = 1
	)
	s := string(text)
	lineStart := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if lineStart {
			// A whole-line comment is copied as it is: references in
			// comments are documentation, not configuration.
			j := i
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
				j++
			}
			if j < len(s) && s[j] == '#' {
				end := strings.IndexByte(s[i:], '\n')
				if end < 0 {
					out.WriteString(s[i:])
					break
				}
				out.WriteString(s[i : i+end+1])
				line++
				i += end
				continue
			}
			lineStart = false
		}
		if c == '\n' {
			line++
			lineStart = true
		}
		if c != '$' || i+1 >= len(s) {
			out.WriteByte(c)
			continue
		}
		next := s[i+1]
		switch {
		case next == '$':
			out.WriteByte('$')
			i++
		case next == '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				errs = append(errs, envError(line, "unterminated ${ in environment reference"))
				out.WriteString(s[i:])
				return []byte(out.String()), errs
			}
			expr := s[i+2 : i+2+end]
			name, def, hasDef := strings.Cut(expr, ":-")
			if !validEnvName(name) {
				errs = append(errs, envError(line, "invalid environment variable name "+strconv.Quote(name)))
			} else if v, ok := lookup(name); ok && (v != "" || !hasDef) {
				out.WriteString(v)
			} else if hasDef {
				out.WriteString(def)
			} else {
				errs = append(errs, envError(line, "environment variable "+name+" is not defined"))
			}
			i += 2 + end
		case isEnvNameStart(next):
			j := i + 1
			for j < len(s) && isEnvNameChar(s[j]) {
				j++
			}
			name := s[i+1 : j]
			if v, ok := lookup(name); ok {
				out.WriteString(v)
			} else {
				msg := "environment variable " + name + " is not defined"
				if j < len(s) && s[j] == '$' {
					// "$apr1$salt$...": a password hash, not a variable.
					msg += " (a $ inside a value such as a password hash is written $$)"
				}
				errs = append(errs, envError(line, msg))
			}
			i = j - 1
		default:
			out.WriteByte(c)
		}
	}
	return []byte(out.String()), errs
}

type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return "line " + strconv.Itoa(e.line) + ": " + e.msg }

func envError(line int, msg string) error { return &lineError{line: line, msg: msg} }

func validEnvName(s string) bool {
	if s == "" || !isEnvNameStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isEnvNameChar(s[i]) {
			return false
		}
	}
	return true
}

func isEnvNameStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isEnvNameChar(c byte) bool  { return isEnvNameStart(c) || c >= '0' && c <= '9' }
