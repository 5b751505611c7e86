package convert

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
)

func TestStreamReader(t *testing.T) {
	_, in := streamInput(t, "text-tool.bedrock.events")
	info := RequestInfo{Client: Messages, Provider: Bedrock, Model: "requested-model", IncludeUsage: true}
	want := runStream(info, in, nil).out
	resetIDs()
	s := NewStream(info)
	got, err := io.ReadAll(s.Reader(iotest.OneByteReader(bytes.NewReader(in))))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("reader:\n%s\nwant\n%s", got, want)
	}

	// A provider body cut short ends the client's stream with an error
	// event and the reader with ErrTruncated.
	resetIDs()
	s = NewStream(info)
	got, err = io.ReadAll(s.Reader(bytes.NewReader(in[:len(in)/2])))
	if err != ErrTruncated || !bytes.Contains(got, []byte("event: error")) {
		t.Errorf("truncated: %v\n%s", err, got)
	}
}

func TestStreamChunkAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	cases := []struct {
		desc             string
		provider, client Format
		prelude, chunk   []byte
	}{
		{desc: "chat to messages", provider: Chat, client: Messages, prelude: []byte(chatPrelude), chunk: []byte(chatChunk)},
		{desc: "messages to chat", provider: Messages, client: Chat, prelude: []byte(anPrelude), chunk: []byte(anChunk)},
		{desc: "bedrock to chat", provider: Bedrock, client: Chat,
			prelude: bedrockFixture(t, []byte(`event messageStart {"role":"assistant"}`)),
			chunk:   bedrockFixture(t, []byte(`event contentBlockDelta {"contentBlockIndex":0,"delta":{"text":" the"}}`))},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			s := NewStream(RequestInfo{Client: tc.client, Provider: tc.provider, Model: "m"})
			out, _ := s.Feed(make([]byte, 0, 4096), tc.prelude)
			out, _ = s.Feed(out[:0], tc.chunk)
			n := testing.AllocsPerRun(100, func() {
				out, _ = s.Feed(out[:0], tc.chunk)
			})
			if n != 0 {
				t.Errorf("%.1f allocations per chunk", n)
			}
		})
	}
}
