package llm

// Anthropic Messages (POST /v1/messages).

// AnthropicRequest is a Messages request.
type AnthropicRequest struct {
	Model string `json:"model"`
	// MaxTokens is an integer, kept raw so that one given (0 too) is told
	// from none.
	MaxTokens Raw `json:"max_tokens"`
	// System is a string or an array of text blocks (AnthropicBlock).
	System      Raw                `json:"system"`
	Messages    []AnthropicMessage `json:"messages"`
	Stream      bool               `json:"stream"`
	Temperature Raw                `json:"temperature"`
	TopP        Raw                `json:"top_p"`
	TopK        Raw                `json:"top_k"`
	// StopSequences is an array of strings.
	StopSequences Raw                 `json:"stop_sequences"`
	Tools         []AnthropicTool     `json:"tools"`
	ToolChoice    AnthropicToolChoice `json:"tool_choice"`
	Thinking      AnthropicThinking   `json:"thinking"`
	Metadata      Raw                 `json:"metadata"`
	// MCPServers are MCP servers Anthropic calls itself (its MCP
	// connector).
	MCPServers Raw `json:"mcp_servers"`
}

// Reset empties r, keeping the capacity of Messages and Tools.
func (r *AnthropicRequest) Reset() {
	*r = AnthropicRequest{Messages: clearSlice(r.Messages), Tools: clearSlice(r.Tools)}
}

// Decode resets r and decodes body into it.
func (r *AnthropicRequest) Decode(d *Decoder, body []byte) error {
	r.Reset()
	return d.Decode(body, r)
}

// AnthropicMessage is one turn (role user or assistant).
type AnthropicMessage struct {
	Role string `json:"role"`
	// Content is a string or an array of blocks (AnthropicBlock).
	Content Raw `json:"content"`
}

// AnthropicBlock is a content block: text, image, document, tool_use,
// tool_result, thinking, redacted_thinking, or a server tool's block.
type AnthropicBlock struct {
	Type string `json:"type"`
	// Text of a text block.
	Text Raw `json:"text"`
	// Source of an image or document block.
	Source AnthropicSource `json:"source"`
	// ID, Name and Input of a tool_use block.
	ID    string `json:"id"`
	Name  string `json:"name"`
	Input Raw    `json:"input"`
	// ToolUseID, Content (a string or an array of blocks) and IsError of a
	// tool_result block.
	ToolUseID string `json:"tool_use_id"`
	Content   Raw    `json:"content"`
	IsError   bool   `json:"is_error"`
	// Thinking and Signature of a thinking block; Data of a
	// redacted_thinking block.
	Thinking  Raw `json:"thinking"`
	Signature Raw `json:"signature"`
	Data      Raw `json:"data"`
	// CacheControl marks a prompt-cache breakpoint ({"type":"ephemeral"}).
	CacheControl Raw `json:"cache_control"`
}

// AnthropicSource is an image's or document's source: type base64 (with
// MediaType and Data) or url.
type AnthropicSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      Raw    `json:"data"`
	URL       Raw    `json:"url"`
}

// AnthropicTool is a tool definition (a client tool has no Type, or
// "custom"; server tools have a versioned type such as web_search_20250305).
type AnthropicTool struct {
	Type         string `json:"type"`
	Name         string `json:"name"`
	Description  Raw    `json:"description"`
	InputSchema  Raw    `json:"input_schema"`
	CacheControl Raw    `json:"cache_control"`
}

// AnthropicToolChoice is auto, any, tool (with Name) or none.
type AnthropicToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// AnthropicThinking enables extended thinking (type enabled, with a budget).
type AnthropicThinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

// AnthropicResponse is a Messages response (type "message"); it is also the
// message of a stream's message_start event.
type AnthropicResponse struct {
	ID      string           `json:"id"`
	Type    string           `json:"type"`
	Role    string           `json:"role"`
	Model   string           `json:"model"`
	Content []AnthropicBlock `json:"content"`
	// StopReason is end_turn, max_tokens, stop_sequence, tool_use,
	// pause_turn or refusal.
	StopReason   string         `json:"stop_reason"`
	StopSequence Raw            `json:"stop_sequence"`
	Usage        AnthropicUsage `json:"usage"`
}

// Reset empties r, keeping the capacity of Content.
func (r *AnthropicResponse) Reset() { *r = AnthropicResponse{Content: clearSlice(r.Content)} }

// Decode resets r and decodes body into it.
func (r *AnthropicResponse) Decode(d *Decoder, body []byte) error {
	r.Reset()
	return d.Decode(body, r)
}

// AnthropicUsage is a response's usage. InputTokens excludes the tokens read
// from and written to the prompt cache.
type AnthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// AnthropicStreamEvent is the data of one stream event. Type is
// message_start (Message), content_block_start (Index, ContentBlock),
// content_block_delta (Index, Delta), content_block_stop (Index),
// message_delta (Delta.StopReason, Usage), message_stop, ping or error
// (Error).
type AnthropicStreamEvent struct {
	Type         string            `json:"type"`
	Message      AnthropicResponse `json:"message"`
	Index        int               `json:"index"`
	ContentBlock AnthropicBlock    `json:"content_block"`
	Delta        AnthropicDelta    `json:"delta"`
	Usage        AnthropicUsage    `json:"usage"`
	Error        AnthropicError    `json:"error"`
}

// Reset empties e.
func (e *AnthropicStreamEvent) Reset() {
	*e = AnthropicStreamEvent{Message: AnthropicResponse{Content: clearSlice(e.Message.Content)}}
}

// Decode resets e and decodes data (one event's data) into it.
func (e *AnthropicStreamEvent) Decode(d *Decoder, data []byte) error {
	e.Reset()
	return d.Decode(data, e)
}

// AnthropicDelta is a content_block_delta's delta (Type text_delta,
// input_json_delta, thinking_delta or signature_delta) or a message_delta's
// (StopReason, StopSequence).
type AnthropicDelta struct {
	Type         string `json:"type"`
	Text         Raw    `json:"text"`
	PartialJSON  Raw    `json:"partial_json"`
	Thinking     Raw    `json:"thinking"`
	Signature    Raw    `json:"signature"`
	StopReason   string `json:"stop_reason"`
	StopSequence Raw    `json:"stop_sequence"`
}

// AnthropicError is an error's type (invalid_request_error,
// authentication_error, permission_error, not_found_error,
// request_too_large, rate_limit_error, api_error, overloaded_error) and
// message.
type AnthropicError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// AnthropicErrorBody is an error response: {"type":"error","error":{...}}.
type AnthropicErrorBody struct {
	Type  string         `json:"type"`
	Error AnthropicError `json:"error"`
}
