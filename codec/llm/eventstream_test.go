package llm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// withDecoders runs f with this package's decoder and with the SDK's.
func withDecoders(t *testing.T, f func(t *testing.T)) {
	for _, sdk := range []bool{false, true} {
		name := "ours"
		if sdk {
			name = "sdk"
		}
		t.Run(name, func(t *testing.T) {
			defer func(old bool) { useSDKDecoder = old }(useSDKDecoder)
			useSDKDecoder = sdk
			f(t)
		})
	}
}

func TestEventStreamSplits(t *testing.T) { withDecoders(t, testEventStreamSplits) }

func testEventStreamSplits(t *testing.T) {
	var in []byte
	in = AppendEventMessage(in, []byte(`{"role":"assistant"}`), ":message-type", "event", ":event-type", "messageStart")
	in = AppendEventMessage(in, []byte(`{"contentBlockIndex":0,"delta":{"text":"hi"}}`), ":message-type", "event", ":event-type", "contentBlockDelta")
	in = AppendEventMessage(in, nil, ":message-type", "event", ":event-type", "contentBlockStop")
	in = AppendEventMessage(in, []byte(`{"message":"slow down"}`), ":message-type", "exception", ":exception-type", "throttlingException")
	want := []EventMessage{
		{MessageType: "event", EventType: "messageStart", Payload: []byte(`{"role":"assistant"}`)},
		{MessageType: "event", EventType: "contentBlockDelta", Payload: []byte(`{"contentBlockIndex":0,"delta":{"text":"hi"}}`)},
		{MessageType: "event", EventType: "contentBlockStop"},
		{MessageType: "exception", ExceptionType: "throttlingException", Payload: []byte(`{"message":"slow down"}`)},
	}
	for _, step := range []int{1, 3, 7, 64, len(in)} {
		var s EventStream
		var got []EventMessage
		for i := 0; i < len(in); i += step {
			_, _ = s.Write(in[i:min(i+step, len(in))])
			for {
				m, ok, err := s.Next()
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if !ok {
					break
				}
				m.Payload = append([]byte(nil), m.Payload...)
				got = append(got, m)
			}
		}
		if s.Pending() || len(got) != len(want) {
			t.Fatalf("step %d: %d messages, pending %v", step, len(got), s.Pending())
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.MessageType != w.MessageType || g.EventType != w.EventType || g.ExceptionType != w.ExceptionType || !bytes.Equal(g.Payload, w.Payload) {
				t.Errorf("step %d message %d: %+v, want %+v", step, i, g, w)
			}
		}
	}
}

func TestEventStreamRefuses(t *testing.T) { withDecoders(t, testEventStreamRefuses) }

func testEventStreamRefuses(t *testing.T) {
	good := AppendEventMessage(nil, []byte(`{}`), ":event-type", "x")
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-6] ^= 1 // payload byte: message CRC fails
	huge := binary.BigEndian.AppendUint32(nil, 1<<30)
	huge = append(huge, make([]byte, 8)...)
	short := binary.BigEndian.AppendUint32(nil, 10)
	short = append(short, make([]byte, 8)...)
	cases := []struct {
		desc string
		in   []byte
		want error
	}{
		{desc: "bad CRC", in: corrupt},
		{desc: "too large", in: huge, want: ErrEventMessageTooLarge},
		{desc: "length below the minimum", in: short, want: ErrEventMessageLength},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			var s EventStream
			_, _ = s.Write(tc.in)
			_, ok, err := s.Next()
			if ok || err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("ok %v err %v, want %v", ok, err, tc.want)
			}
			if _, _, again := s.Next(); again != err {
				t.Error("error not sticky")
			}
		})
	}
}

func TestEventStreamDecodeAllocs(t *testing.T) {
	frame := AppendEventMessage(nil, []byte(`{"contentBlockIndex":0,"delta":{"text":"hi"}}`),
		":event-type", "contentBlockDelta", ":content-type", "application/json", ":message-type", "event")
	var s EventStream
	n := testing.AllocsPerRun(100, func() {
		s.Reset()
		_, _ = s.Write(frame)
		if _, ok, err := s.Next(); !ok || err != nil {
			t.Fatal(ok, err)
		}
	})
	if n != 0 {
		t.Errorf("%.0f allocations per message", n)
	}
}

func benchmarkEventStream(b *testing.B, sdk bool) {
	defer func(old bool) { useSDKDecoder = old }(useSDKDecoder)
	useSDKDecoder = sdk
	frame := AppendEventMessage(nil, []byte(`{"contentBlockIndex":0,"delta":{"text":" the gateway"},"p":"abcdefghijklmnopqrs"}`),
		":event-type", "contentBlockDelta", ":content-type", "application/json", ":message-type", "event")
	var s EventStream
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = s.Write(frame)
		if _, ok, err := s.Next(); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkEventStreamDecode(b *testing.B)    { benchmarkEventStream(b, false) }
func BenchmarkEventStreamDecodeSDK(b *testing.B) { benchmarkEventStream(b, true) }
