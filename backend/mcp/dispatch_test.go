package mcp

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestMergeInitialize(t *testing.T) {
	results := []*jsonrpc.Response{
		{Result: json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":false},"logging":{}},"serverInfo":{"name":"a"},"instructions":"use a"}`)},
		{Result: json.RawMessage(`{"protocolVersion":"2025-03-26","capabilities":{"tools":{"listChanged":true},"prompts":{}},"serverInfo":{"name":"b"}}`)},
		{Error: &jsonrpc.Error{Code: 1, Message: "down"}},
	}
	var got struct {
		ProtocolVersion string                    `json:"protocolVersion"`
		Capabilities    map[string]map[string]any `json:"capabilities"`
		ServerInfo      map[string]string         `json:"serverInfo"`
		Instructions    string                    `json:"instructions"`
	}
	results = append(results, &jsonrpc.Response{Result: json.RawMessage(`{"protocolVersion":"1.0","capabilities":{}}`)})
	if err := json.Unmarshal(mergeInitialize(results, []int{0, 1, 3}, "2025-11-25"), &got); err != nil {
		t.Fatal(err)
	}
	if got.ProtocolVersion != "2025-03-26" {
		t.Errorf("version %q, want the oldest the gateway knows", got.ProtocolVersion)
	}
	var only struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(mergeInitialize(results, []int{3}, "2025-11-25"), &only); err != nil || only.ProtocolVersion != "2025-11-25" {
		t.Errorf("version %q (%v) with no known one answered, want the fallback", only.ProtocolVersion, err)
	}
	if got.Capabilities["tools"]["listChanged"] != true {
		t.Errorf("tools.listChanged not OR'ed: %v", got.Capabilities["tools"])
	}
	for _, c := range []string{"tools", "logging", "prompts"} {
		if got.Capabilities[c] == nil {
			t.Errorf("capability %s lost", c)
		}
	}
	if got.ServerInfo["name"] != "relaygate" || got.Instructions != "use a" {
		t.Errorf("serverInfo %v, instructions %q", got.ServerInfo, got.Instructions)
	}
}

func TestIDKeyTellsNumbersFromStrings(t *testing.T) {
	if idKey(float64(1)) == idKey("1") || idKey(int64(1)) != idKey(float64(1)) || idKey(nil) != "" {
		t.Fatal("idKey mixes ids up")
	}
}

func TestRequestProgressToken(t *testing.T) {
	for _, tc := range []struct {
		params string
		want   string
	}{
		{`{"_meta":{"progressToken":5}}`, "n:5"},
		{`{"_meta":{"progressToken":"abc"}}`, "s:abc"},
		{`{"_meta":{}}`, ""},
		{`{}`, ""},
		{`[1]`, ""},
		{``, ""},
	} {
		if got := requestProgressToken(json.RawMessage(tc.params)); got != tc.want {
			t.Errorf("requestProgressToken(%s) = %q, want %q", tc.params, got, tc.want)
		}
	}
}
