package llm

// OpenAI Responses API (POST /v1/responses).

// ResponsesRequest is a Responses request.
type ResponsesRequest struct {
	Model string `json:"model"`
	// Input is a string (one user message) or an array of items
	// (ResponsesItem).
	Input Raw `json:"input"`
	// Instructions is a system message (a string).
	Instructions Raw `json:"instructions"`
	// MaxOutputTokens is an integer, kept raw so that one given (0 too)
	// is told from none.
	MaxOutputTokens Raw             `json:"max_output_tokens"`
	Stream          bool            `json:"stream"`
	Temperature     Raw             `json:"temperature"`
	TopP            Raw             `json:"top_p"`
	Tools           []ResponsesTool `json:"tools"`
	// ToolChoice is "none", "auto", "required" or {"type":"function","name":...}.
	ToolChoice         Raw    `json:"tool_choice"`
	ParallelToolCalls  Raw    `json:"parallel_tool_calls"`
	PreviousResponseID string `json:"previous_response_id"`
	// Conversation (an id, or {"id":...}) and Prompt ({"id":...,
	// "variables":...}) name a conversation or a prompt template stored
	// at OpenAI.
	Conversation Raw                `json:"conversation"`
	Prompt       Raw                `json:"prompt"`
	Reasoning    ResponsesReasoning `json:"reasoning"`
	Text         Raw                `json:"text"`
	Store        Raw                `json:"store"`
	Metadata     Raw                `json:"metadata"`
	User         string             `json:"user"`
	// TopLogprobs (an integer) asks for the output tokens' log
	// probabilities.
	TopLogprobs Raw `json:"top_logprobs"`
}

// Reset empties r, keeping the capacity of Tools.
func (r *ResponsesRequest) Reset() { *r = ResponsesRequest{Tools: clearSlice(r.Tools)} }

// Decode resets r and decodes body into it.
func (r *ResponsesRequest) Decode(d *Decoder, body []byte) error {
	r.Reset()
	return d.Decode(body, r)
}

// ResponsesReasoning is a request's reasoning options.
type ResponsesReasoning struct {
	Effort  string `json:"effort"`
	Summary Raw    `json:"summary"`
}

// ResponsesTool is a tool definition: type function (Name, Description,
// Parameters, Strict) or a built-in tool (web_search, file_search, ...).
type ResponsesTool struct {
	Type        string `json:"type"`
	Name        string `json:"name"`
	Description Raw    `json:"description"`
	Parameters  Raw    `json:"parameters"`
	Strict      Raw    `json:"strict"`
}

// ResponsesItem is an input or output item: message (Role, Content),
// function_call (CallID, Name, Arguments), function_call_output (CallID,
// Output) or reasoning (Summary, EncryptedContent). An input item with a
// Role and no Type is a message.
type ResponsesItem struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Status string `json:"status"`
	Role   string `json:"role"`
	// Content is a string or an array of ResponsesContent.
	Content Raw    `json:"content"`
	CallID  string `json:"call_id"`
	Name    string `json:"name"`
	// Arguments is a string token whose text is JSON.
	Arguments Raw `json:"arguments"`
	// Output is a string or an array of ResponsesContent.
	Output Raw `json:"output"`
	// Summary is an array of ResponsesContent (summary_text).
	Summary          Raw `json:"summary"`
	EncryptedContent Raw `json:"encrypted_content"`
}

// ResponsesContent is a content part: input_text, output_text, refusal,
// input_image (ImageURL, a URL or data URL, or FileID), input_file or
// summary_text.
type ResponsesContent struct {
	Type     string `json:"type"`
	Text     Raw    `json:"text"`
	Refusal  Raw    `json:"refusal"`
	ImageURL Raw    `json:"image_url"`
	FileID   string `json:"file_id"`
	Detail   string `json:"detail"`
}

// ResponsesResponse is a response object (object "response"), also carried
// by the stream's response.created, response.completed, response.incomplete
// and response.failed events.
type ResponsesResponse struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	CreatedAt int64  `json:"created_at"`
	// Status is completed, incomplete, failed, in_progress, ...
	Status            string          `json:"status"`
	Model             string          `json:"model"`
	Output            []ResponsesItem `json:"output"`
	Usage             ResponsesUsage  `json:"usage"`
	IncompleteDetails struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error Raw `json:"error"`
}

// Reset empties r, keeping the capacity of Output.
func (r *ResponsesResponse) Reset() { *r = ResponsesResponse{Output: clearSlice(r.Output)} }

// Decode resets r and decodes body into it.
func (r *ResponsesResponse) Decode(d *Decoder, body []byte) error {
	r.Reset()
	return d.Decode(body, r)
}

// ResponsesUsage is a response's usage; InputTokens includes the cached
// tokens and OutputTokens the reasoning tokens.
type ResponsesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// ResponsesStreamEvent is the data of one stream event; Type is the event's
// name (response.created, response.output_item.added,
// response.output_text.delta, response.function_call_arguments.delta,
// response.completed, error, ...).
type ResponsesStreamEvent struct {
	Type           string            `json:"type"`
	SequenceNumber int64             `json:"sequence_number"`
	Response       ResponsesResponse `json:"response"`
	OutputIndex    int               `json:"output_index"`
	ContentIndex   int               `json:"content_index"`
	ItemID         string            `json:"item_id"`
	Item           ResponsesItem     `json:"item"`
	// Delta is the string token of a *.delta event.
	Delta Raw `json:"delta"`
	// Code and Message of an error event.
	Code    Raw `json:"code"`
	Message Raw `json:"message"`
}

// Reset empties e.
func (e *ResponsesStreamEvent) Reset() {
	*e = ResponsesStreamEvent{Response: ResponsesResponse{Output: clearSlice(e.Response.Output)}}
}

// Decode resets e and decodes data (one event's data) into it.
func (e *ResponsesStreamEvent) Decode(d *Decoder, data []byte) error {
	e.Reset()
	return d.Decode(data, e)
}
