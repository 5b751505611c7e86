package llm

// Bedrock Converse (POST /model/{modelId}/converse) and ConverseStream
// (POST /model/{modelId}/converse-stream, answered as an AWS event stream,
// see EventStream). The model is in the path, not the body.

// BedrockRequest is a Converse request.
type BedrockRequest struct {
	Messages []BedrockMessage `json:"messages"`
	// System is an array of {text} and {cachePoint} blocks.
	System                       []BedrockBlock         `json:"system"`
	InferenceConfig              BedrockInferenceConfig `json:"inferenceConfig"`
	ToolConfig                   BedrockToolConfig      `json:"toolConfig"`
	AdditionalModelRequestFields Raw                    `json:"additionalModelRequestFields"`
	GuardrailConfig              Raw                    `json:"guardrailConfig"`
}

// Reset empties r, keeping the capacity of Messages and System.
func (r *BedrockRequest) Reset() {
	*r = BedrockRequest{Messages: clearSlice(r.Messages), System: clearSlice(r.System)}
}

// Decode resets r and decodes body into it.
func (r *BedrockRequest) Decode(d *Decoder, body []byte) error {
	r.Reset()
	return d.Decode(body, r)
}

// BedrockInferenceConfig holds the sampling options.
type BedrockInferenceConfig struct {
	MaxTokens     int `json:"maxTokens"`
	Temperature   Raw `json:"temperature"`
	TopP          Raw `json:"topP"`
	StopSequences Raw `json:"stopSequences"`
}

// BedrockToolConfig lists the tools; ToolChoice is {"auto":{}}, {"any":{}}
// or {"tool":{"name":...}}.
type BedrockToolConfig struct {
	Tools      []BedrockTool `json:"tools"`
	ToolChoice Raw           `json:"toolChoice"`
}

// BedrockTool is a {toolSpec} or a {cachePoint}.
type BedrockTool struct {
	ToolSpec struct {
		Name        string `json:"name"`
		Description Raw    `json:"description"`
		InputSchema struct {
			JSON Raw `json:"json"`
		} `json:"inputSchema"`
	} `json:"toolSpec"`
	CachePoint Raw `json:"cachePoint"`
}

// BedrockMessage is one turn (role user or assistant).
type BedrockMessage struct {
	Role    string         `json:"role"`
	Content []BedrockBlock `json:"content"`
}

// BedrockBlock is a content block; exactly one member is set.
type BedrockBlock struct {
	Text  Raw `json:"text"`
	Image struct {
		// Format is png, jpeg, gif or webp.
		Format string `json:"format"`
		Source struct {
			Bytes Raw `json:"bytes"`
		} `json:"source"`
	} `json:"image"`
	ToolUse struct {
		ToolUseID string `json:"toolUseId"`
		Name      string `json:"name"`
		Input     Raw    `json:"input"`
	} `json:"toolUse"`
	ToolResult struct {
		ToolUseID string `json:"toolUseId"`
		// Content is an array of {text}, {json}, {image} or {document}.
		Content Raw `json:"content"`
		// Status is success or error.
		Status string `json:"status"`
	} `json:"toolResult"`
	ReasoningContent struct {
		ReasoningText struct {
			Text      Raw `json:"text"`
			Signature Raw `json:"signature"`
		} `json:"reasoningText"`
		RedactedContent Raw `json:"redactedContent"`
	} `json:"reasoningContent"`
	CachePoint Raw `json:"cachePoint"`
}

// BedrockResponse is a Converse response.
type BedrockResponse struct {
	Output struct {
		Message BedrockMessage `json:"message"`
	} `json:"output"`
	// StopReason is end_turn, tool_use, max_tokens, stop_sequence,
	// guardrail_intervened, content_filtered or
	// model_context_window_exceeded.
	StopReason string       `json:"stopReason"`
	Usage      BedrockUsage `json:"usage"`
	Metrics    Raw          `json:"metrics"`
}

// Reset empties r, keeping the capacity of its message's content.
func (r *BedrockResponse) Reset() {
	content := clearSlice(r.Output.Message.Content)
	*r = BedrockResponse{}
	r.Output.Message.Content = content
}

// Decode resets r and decodes body into it.
func (r *BedrockResponse) Decode(d *Decoder, body []byte) error {
	r.Reset()
	return d.Decode(body, r)
}

// BedrockUsage is a response's usage. InputTokens excludes the tokens read
// from and written to the prompt cache; TotalTokens includes them.
type BedrockUsage struct {
	InputTokens           int64 `json:"inputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	TotalTokens           int64 `json:"totalTokens"`
	CacheReadInputTokens  int64 `json:"cacheReadInputTokens"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
}

// BedrockStreamEvent is the payload of one ConverseStream event; which
// members are set depends on the event type (EventMessage.EventType):
// messageStart (Role), contentBlockStart (ContentBlockIndex, Start),
// contentBlockDelta (ContentBlockIndex, Delta), contentBlockStop
// (ContentBlockIndex), messageStop (StopReason), metadata (Usage, Metrics).
// An exception's payload has Message.
type BedrockStreamEvent struct {
	Role              string `json:"role"`
	ContentBlockIndex int    `json:"contentBlockIndex"`
	Start             struct {
		ToolUse struct {
			ToolUseID string `json:"toolUseId"`
			Name      string `json:"name"`
		} `json:"toolUse"`
	} `json:"start"`
	Delta struct {
		Text    Raw `json:"text"`
		ToolUse struct {
			// Input is a string token holding a piece of the input's JSON.
			Input Raw `json:"input"`
		} `json:"toolUse"`
		ReasoningContent struct {
			Text            Raw `json:"text"`
			Signature       Raw `json:"signature"`
			RedactedContent Raw `json:"redactedContent"`
		} `json:"reasoningContent"`
	} `json:"delta"`
	StopReason string       `json:"stopReason"`
	Usage      BedrockUsage `json:"usage"`
	Metrics    Raw          `json:"metrics"`
	Message    string       `json:"message"`
}

// Reset empties e.
func (e *BedrockStreamEvent) Reset() { *e = BedrockStreamEvent{} }

// Decode resets e and decodes payload into it.
func (e *BedrockStreamEvent) Decode(d *Decoder, payload []byte) error {
	e.Reset()
	return d.Decode(payload, e)
}

// BedrockErrorBody is an error response, {"message":...} (some services
// capitalise it); the error's kind is in the x-amzn-ErrorType header.
type BedrockErrorBody struct {
	Message      string `json:"message"`
	MessageUpper string `json:"Message"`
}

// Text is the error's message, whichever way it was spelled.
func (b *BedrockErrorBody) Text() string {
	if b.Message != "" {
		return b.Message
	}
	return b.MessageUpper
}
