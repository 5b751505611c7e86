package llm

// Gemini generateContent, as the Gemini API (generativelanguage) and Vertex
// AI serve it: POST .../models/{model}:generateContent, and
// :streamGenerateContent?alt=sse for a stream of GeminiResponse events. The
// model is in the path, not the body.

// GeminiRequest is a generateContent request.
type GeminiRequest struct {
	Contents          []GeminiContent `json:"contents"`
	SystemInstruction GeminiContent   `json:"systemInstruction"`
	Tools             []GeminiTool    `json:"tools"`
	// ToolConfig is {"functionCallingConfig":{"mode":...,"allowedFunctionNames":[...]}}.
	ToolConfig       Raw                    `json:"toolConfig"`
	GenerationConfig GeminiGenerationConfig `json:"generationConfig"`
	SafetySettings   Raw                    `json:"safetySettings"`
	CachedContent    string                 `json:"cachedContent"`
}

// Reset empties r, keeping the capacity of Contents and Tools.
func (r *GeminiRequest) Reset() {
	*r = GeminiRequest{Contents: clearSlice(r.Contents), Tools: clearSlice(r.Tools)}
}

// Decode resets r and decodes body into it.
func (r *GeminiRequest) Decode(d *Decoder, body []byte) error {
	r.Reset()
	return d.Decode(body, r)
}

// GeminiContent is one turn (role user or model) or the system instruction.
type GeminiContent struct {
	Role  string       `json:"role"`
	Parts []GeminiPart `json:"parts"`
}

// GeminiPart is one part; exactly one of its members is set.
type GeminiPart struct {
	Text Raw `json:"text"`
	// Thought marks a text part as the model's thinking.
	Thought          bool                   `json:"thought"`
	ThoughtSignature Raw                    `json:"thoughtSignature"`
	InlineData       GeminiBlob             `json:"inlineData"`
	FileData         GeminiFileData         `json:"fileData"`
	FunctionCall     GeminiFunctionCall     `json:"functionCall"`
	FunctionResponse GeminiFunctionResponse `json:"functionResponse"`
}

// GeminiBlob is inline data: a MIME type and base64 Data.
type GeminiBlob struct {
	MimeType string `json:"mimeType"`
	Data     Raw    `json:"data"`
}

// GeminiFileData refers to data by URI.
type GeminiFileData struct {
	MimeType string `json:"mimeType"`
	FileURI  Raw    `json:"fileUri"`
}

// GeminiFunctionCall is the model's call of a function; Args is an object.
type GeminiFunctionCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Args Raw    `json:"args"`
}

// GeminiFunctionResponse is a function's result; Response is an object.
type GeminiFunctionResponse struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Response Raw    `json:"response"`
}

// GeminiTool is a tool: function declarations, or a built-in tool (kept raw).
type GeminiTool struct {
	FunctionDeclarations []GeminiFunctionDeclaration `json:"functionDeclarations"`
	GoogleSearch         Raw                         `json:"googleSearch"`
	CodeExecution        Raw                         `json:"codeExecution"`
}

// GeminiFunctionDeclaration declares a function. Parameters is an OpenAPI
// schema subset; ParametersJSONSchema takes full JSON Schema.
type GeminiFunctionDeclaration struct {
	Name                 string `json:"name"`
	Description          Raw    `json:"description"`
	Parameters           Raw    `json:"parameters"`
	ParametersJSONSchema Raw    `json:"parametersJsonSchema"`
}

// GeminiGenerationConfig holds the sampling and output options.
type GeminiGenerationConfig struct {
	MaxOutputTokens  int    `json:"maxOutputTokens"`
	Temperature      Raw    `json:"temperature"`
	TopP             Raw    `json:"topP"`
	TopK             Raw    `json:"topK"`
	StopSequences    Raw    `json:"stopSequences"`
	CandidateCount   int    `json:"candidateCount"`
	ThinkingConfig   Raw    `json:"thinkingConfig"`
	ResponseMimeType string `json:"responseMimeType"`
	ResponseSchema   Raw    `json:"responseSchema"`
}

// GeminiResponse is a generateContent response, and each event of
// streamGenerateContent (whose usageMetadata is cumulative).
type GeminiResponse struct {
	Candidates     []GeminiCandidate `json:"candidates"`
	UsageMetadata  GeminiUsage       `json:"usageMetadata"`
	ModelVersion   string            `json:"modelVersion"`
	ResponseID     string            `json:"responseId"`
	PromptFeedback Raw               `json:"promptFeedback"`
	// Error is set when a stream reports a failure in an event.
	Error Raw `json:"error"`
}

// Reset empties r, keeping the capacity of Candidates.
func (r *GeminiResponse) Reset() { *r = GeminiResponse{Candidates: clearSlice(r.Candidates)} }

// Decode resets r and decodes body into it.
func (r *GeminiResponse) Decode(d *Decoder, body []byte) error {
	r.Reset()
	return d.Decode(body, r)
}

// GeminiCandidate is one candidate. FinishReason is STOP, MAX_TOKENS,
// SAFETY, RECITATION, ... (empty until the candidate ends).
type GeminiCandidate struct {
	Content      GeminiContent `json:"content"`
	FinishReason string        `json:"finishReason"`
	Index        int           `json:"index"`
}

// GeminiUsage is a response's usage: PromptTokenCount includes
// CachedContentTokenCount; CandidatesTokenCount excludes ThoughtsTokenCount.
type GeminiUsage struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
}

// GeminiErrorBody is an error response (Google's shape; some endpoints wrap
// it in a one-element array).
type GeminiErrorBody struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		// Status is INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED, ...
		Status string `json:"status"`
	} `json:"error"`
}
