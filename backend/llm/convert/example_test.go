package convert_test

import (
	"fmt"

	"github.com/relaygate/gateway/backend/llm/convert"
)

func ExampleRequest() {
	client := []byte(`{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":100}`)
	body, info, err := convert.Request(nil, convert.Chat, convert.Bedrock, client,
		&convert.Options{Model: "anthropic.claude-sonnet-4-5"})
	if err != nil {
		e := err.(*convert.Error)
		fmt.Println(string(convert.AppendError(nil, convert.Chat, e.Status, e.Message)))
		return
	}
	fmt.Println("POST /model/" + info.Model + "/converse")
	fmt.Println(string(body))
	// Output:
	// POST /model/anthropic.claude-sonnet-4-5/converse
	// {"messages":[{"role":"user","content":[{"text":"Hi"}]}],"system":[{"text":"Be brief."}],"inferenceConfig":{"maxTokens":100}}
}

func ExampleStream() {
	info := convert.RequestInfo{Client: convert.Messages, Provider: convert.Chat, Model: "gpt-4o", Stream: true, IncludeUsage: true}
	s := convert.AcquireStream(info)
	defer convert.ReleaseStream(s)
	var out []byte
	for _, piece := range []string{
		`data: {"id":"chatcmpl-1","model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"He`,
		`llo"},"finish_reason":null}]}` + "\n\ndata: " + `{"id":"chatcmpl-1","model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n",
		`data: {"id":"chatcmpl-1","model":"gpt-4o","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}` + "\n\ndata: [DONE]\n\n",
	} {
		out, _ = s.Feed(out[:0], []byte(piece))
		fmt.Print(string(out))
	}
	out, _ = s.Close(out[:0])
	fmt.Print(string(out))
	fmt.Printf("usage: %+v\n", s.Usage())
	// Output:
	// event: message_start
	// data: {"type":"message_start","message":{"id":"chatcmpl-1","type":"message","role":"assistant","model":"gpt-4o","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}
	//
	// event: content_block_start
	// data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}
	//
	// event: content_block_delta
	// data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}
	//
	// event: content_block_stop
	// data: {"type":"content_block_stop","index":0}
	//
	// event: message_delta
	// data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":9,"output_tokens":1}}
	//
	// event: message_stop
	// data: {"type":"message_stop"}
	//
	// usage: {InputTokens:9 OutputTokens:1 CachedInputTokens:0 CacheWriteInputTokens:0 ReasoningTokens:0}
}
