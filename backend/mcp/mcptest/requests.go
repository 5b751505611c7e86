package mcptest

//lint:file-ignore SA1019 sampling and roots are deprecated from protocol 2026-07-28 on, but the gateway relays them for the versions before

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type sampleIn struct {
	Prompt string `json:"prompt,omitempty" jsonschema:"what to ask the client's model"`
}

// sample asks the client for a sampling/createMessage through a multi
// round-trip result (see the package comment) and returns its answer's text.
func sample(_ context.Context, req *mcp.CallToolRequest, in sampleIn) (*mcp.CallToolResult, any, error) {
	if r, ok := req.Params.InputResponses["sample"]; ok {
		res, ok := r.(*mcp.CreateMessageWithToolsResult)
		if !ok {
			return nil, nil, fmt.Errorf("sample: the client answered with %T", r)
		}
		var parts []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				parts = append(parts, tc.Text)
			}
		}
		return text(strings.Join(parts, "")), nil, nil
	}
	prompt := in.Prompt
	if prompt == "" {
		prompt = "hello"
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"sample": &mcp.CreateMessageParams{
		Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: prompt}}},
		MaxTokens: 100,
	}}}, nil, nil
}

// roots asks the client for roots/list the same way and returns the root
// URIs.
func roots(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	if r, ok := req.Params.InputResponses["roots"]; ok {
		res, ok := r.(*mcp.ListRootsResult)
		if !ok {
			return nil, nil, fmt.Errorf("roots: the client answered with %T", r)
		}
		var uris []string
		for _, root := range res.Roots {
			uris = append(uris, root.URI)
		}
		return text(strings.Join(uris, ",")), nil, nil
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}}}, nil, nil
}
