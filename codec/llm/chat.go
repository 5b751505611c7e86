package llm

// OpenAI Chat Completions (POST /v1/chat/completions), the format most
// OpenAI-compatible providers (Azure OpenAI, vLLM, Ollama, ...) speak.

// ChatRequest is a Chat Completions request.
type ChatRequest struct {
	Model    string        `json:"model"`
	Messages []ChatMessage `json:"messages"`
	Stream   bool          `json:"stream"`
	// StreamOptions.IncludeUsage asks for a last chunk carrying usage.
	StreamOptions ChatStreamOptions `json:"stream_options"`
	// MaxTokens and MaxCompletionTokens are integers, kept raw so that
	// one given (0 too) is told from none.
	MaxTokens           Raw `json:"max_tokens"`
	MaxCompletionTokens Raw `json:"max_completion_tokens"`
	Temperature         Raw `json:"temperature"`
	TopP                Raw `json:"top_p"`
	// Stop is a string or an array of strings.
	Stop  Raw        `json:"stop"`
	Tools []ChatTool `json:"tools"`
	// ToolChoice is "none", "auto", "required" or
	// {"type":"function","function":{"name":...}}.
	ToolChoice        Raw    `json:"tool_choice"`
	ParallelToolCalls Raw    `json:"parallel_tool_calls"`
	ReasoningEffort   string `json:"reasoning_effort"`
	ResponseFormat    Raw    `json:"response_format"`
	N                 int    `json:"n"`
	User              string `json:"user"`
	// Logprobs (a boolean) and TopLogprobs (an integer) ask for the
	// output tokens' log probabilities.
	Logprobs    Raw `json:"logprobs"`
	TopLogprobs Raw `json:"top_logprobs"`
	// Seed, FrequencyPenalty and PresencePenalty tune sampling.
	Seed             Raw `json:"seed"`
	FrequencyPenalty Raw `json:"frequency_penalty"`
	PresencePenalty  Raw `json:"presence_penalty"`
	// Audio asks for a spoken answer; WebSearchOptions for OpenAI's web
	// search.
	Audio            Raw `json:"audio"`
	WebSearchOptions Raw `json:"web_search_options"`
}

// Reset empties r, keeping the capacity of Messages and Tools.
func (r *ChatRequest) Reset() {
	*r = ChatRequest{Messages: clearSlice(r.Messages), Tools: clearSlice(r.Tools)}
}

// Decode resets r and decodes body into it.
func (r *ChatRequest) Decode(d *Decoder, body []byte) error {
	r.Reset()
	return d.Decode(body, r)
}

// ChatStreamOptions is a request's stream_options.
type ChatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatMessage is one message of a request (role system, developer, user,
// assistant or tool), a response's message, or a stream chunk's delta.
type ChatMessage struct {
	Role string `json:"role"`
	// Content is a string, an array of parts (ChatContentPart), or null.
	Content    Raw            `json:"content"`
	Name       string         `json:"name"`
	ToolCalls  []ChatToolCall `json:"tool_calls"`
	ToolCallID string         `json:"tool_call_id"`
	Refusal    Raw            `json:"refusal"`
	// ReasoningContent is the reasoning text some compatible providers
	// (DeepSeek, vLLM, ...) return beside the content.
	ReasoningContent Raw `json:"reasoning_content"`
}

// ChatContentPart is one part of an array content: text, image_url,
// input_audio, file or (assistant) refusal.
type ChatContentPart struct {
	Type     string       `json:"type"`
	Text     Raw          `json:"text"`
	ImageURL ChatImageURL `json:"image_url"`
	Refusal  Raw          `json:"refusal"`
}

// ChatImageURL is an image part's image_url: an http(s) URL or a data URL
// (data:image/png;base64,...).
type ChatImageURL struct {
	URL    Raw    `json:"url"`
	Detail string `json:"detail"`
}

// ChatToolCall is an assistant's call of a function tool. In a stream chunk,
// Index says which call a piece belongs to and only the first piece carries
// ID and Name.
type ChatToolCall struct {
	Index    int              `json:"index"`
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function ChatFunctionCall `json:"function"`
	// ExtraContent is what Gemini's OpenAI-compatible API adds to a call.
	ExtraContent ChatExtraContent `json:"extra_content"`
}

// ChatExtraContent is a tool call's extra_content as Gemini's
// OpenAI-compatible API writes it: Google.ThoughtSignature is the call's
// thought signature (a string token), which a Gemini 3 model needs back
// with the call in the next request.
type ChatExtraContent struct {
	Google struct {
		ThoughtSignature Raw `json:"thought_signature"`
	} `json:"google"`
}

// ChatFunctionCall is a tool call's function.
type ChatFunctionCall struct {
	Name string `json:"name"`
	// Arguments is a string token whose text is JSON (or a piece of it in a
	// stream chunk).
	Arguments Raw `json:"arguments"`
}

// ChatTool is a tool definition; only type "function" has a Function.
type ChatTool struct {
	Type     string       `json:"type"`
	Function ChatFunction `json:"function"`
}

// ChatFunction is a function tool's definition.
type ChatFunction struct {
	Name        string `json:"name"`
	Description Raw    `json:"description"`
	// Parameters is a JSON Schema object.
	Parameters Raw `json:"parameters"`
	Strict     Raw `json:"strict"`
}

// ChatResponse is a Chat Completions response.
type ChatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   ChatUsage    `json:"usage"`
}

// Reset empties r, keeping the capacity of Choices.
func (r *ChatResponse) Reset() { *r = ChatResponse{Choices: clearSlice(r.Choices)} }

// Decode resets r and decodes body into it.
func (r *ChatResponse) Decode(d *Decoder, body []byte) error {
	r.Reset()
	return d.Decode(body, r)
}

// ChatChunk is one event of a streamed response (object
// "chat.completion.chunk"); the stream ends with the data "[DONE]". With
// stream_options.include_usage the last chunk has no choices and a usage.
type ChatChunk struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	// Usage is set (Present) on the usage chunk; null elsewhere.
	Usage Raw `json:"usage"`
	// Error is set by providers that report a failure inside the stream.
	Error Raw `json:"error"`
}

// Reset empties c, keeping the capacity of Choices.
func (c *ChatChunk) Reset() { *c = ChatChunk{Choices: clearSlice(c.Choices)} }

// Decode resets c and decodes data (one event's data) into it.
func (c *ChatChunk) Decode(d *Decoder, data []byte) error {
	c.Reset()
	return d.Decode(data, c)
}

// ChatChoice is one choice of a response (Message) or chunk (Delta).
type ChatChoice struct {
	Index   int         `json:"index"`
	Message ChatMessage `json:"message"`
	Delta   ChatMessage `json:"delta"`
	// FinishReason is stop, length, tool_calls, content_filter or
	// function_call; empty (null) until the choice ends.
	FinishReason string `json:"finish_reason"`
}

// ChatUsage is a response's token usage. PromptTokens includes the cached
// tokens; CompletionTokens includes the reasoning tokens.
type ChatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// ErrorBody is the error body of the OpenAI formats (Chat Completions and
// Responses): {"error":{"message":...,"type":...,"param":...,"code":...}}.
type ErrorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Param   Raw    `json:"param"`
		Code    Raw    `json:"code"`
	} `json:"error"`
}

// clearSlice zeroes s's backing array (the decoder would otherwise leave the
// previous decode's members in reused elements) and returns it empty.
func clearSlice[T any](s []T) []T {
	clear(s[:cap(s)])
	return s[:0]
}
