package config

import (
	"encoding/json"

	"github.com/relaygate/gateway/config/decode"
)

// Secret is a credential given inline (a string) or read from a file
// (`{file: path}`): agentgateway's FileOrInline as used for API keys,
// backend auth keys and Google credentials. The file is read where the
// credential is used, not when the configuration is parsed. /config_dump
// shows a file's path and hides an inline value (Redacted).
type Secret struct {
	Inline string
	File   string
}

// IsFile reports whether the secret is read from a file.
func (s Secret) IsFile() bool { return s.File != "" }

// DecodeNode decodes the string-or-{file} union.
func (s *Secret) DecodeNode(n *decode.Node) {
	if str, ok := n.String(); ok {
		if str == "" {
			n.Errorf("must not be empty (an environment variable that expanded to nothing?)")
			return
		}
		s.Inline = str
		return
	}
	if n.Kind() != decode.Map {
		n.Errorf("expected a secret as a string or {file: path}, got %s", n.Describe())
		return
	}
	var f struct {
		File string `json:"file" cfg:"required,minLen=1"`
	}
	if n.Decode(&f) {
		s.File = f.File
	}
}

// MarshalJSON writes {"file": path}, or Redacted for an inline value.
func (s Secret) MarshalJSON() ([]byte, error) {
	if s.IsFile() {
		return json.Marshal(map[string]string{"file": s.File})
	}
	return jsonString(Redacted), nil
}

// SecretString is a credential that the schema takes only as a string
// (an AWS secret access key or session token, an Azure client secret).
// /config_dump shows it as Redacted.
type SecretString string

// MarshalJSON writes Redacted.
func (s SecretString) MarshalJSON() ([]byte, error) { return jsonString(Redacted), nil }
