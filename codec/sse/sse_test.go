package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type got struct {
	Type, ID, Data string
	Retry          int
	HasRetry       bool
}

// readAll reads every event of in and the final error.
func readAll(in io.Reader, max int) ([]got, error) {
	r := NewReader(in, max)
	var out []got
	for {
		ev, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, got{ev.Type, ev.ID, string(ev.Data), ev.Retry, ev.HasRetry})
	}
}

func TestReader(t *testing.T) {
	msg := func(data string) got { return got{Type: "message", Data: data} }
	tests := []struct {
		name  string
		in    string
		max   int
		want  []got
		err   error
		after func(t *testing.T, r *Reader)
	}{
		{name: "empty", in: "", err: io.EOF},
		{name: "one event", in: "data: hello\n\n", want: []got{msg("hello")}, err: io.EOF},
		{name: "no space after colon", in: "data:hello\n\n", want: []got{msg("hello")}, err: io.EOF},
		{name: "only one space stripped", in: "data:  two\n\n", want: []got{msg(" two")}, err: io.EOF},
		{name: "multi-line data", in: "data: a\ndata: b\ndata:\ndata: c\n\n", want: []got{msg("a\nb\n\nc")}, err: io.EOF},
		{name: "CRLF", in: "data: a\r\ndata: b\r\n\r\n", want: []got{msg("a\nb")}, err: io.EOF},
		{name: "CR", in: "data: a\rdata: b\r\r", want: []got{msg("a\nb")}, err: io.EOF},
		{name: "mixed line ends", in: "data: a\r\ndata: b\rdata: c\n\r\n", want: []got{msg("a\nb\nc")}, err: io.EOF},
		{name: "CR then LF is one line end", in: "data: a\r\n\r\ndata: b\n\n", want: []got{msg("a"), msg("b")}, err: io.EOF},
		{name: "comments", in: ": hi\ndata: x\n:another\n\n", want: []got{msg("x")}, err: io.EOF},
		{name: "event type", in: "event: ping\ndata: {}\n\n", want: []got{{Type: "ping", Data: "{}"}}, err: io.EOF},
		{name: "type resets after dispatch", in: "event: a\ndata: 1\n\ndata: 2\n\n", want: []got{{Type: "a", Data: "1"}, msg("2")}, err: io.EOF},
		{name: "empty type is message", in: "event:\ndata: 1\n\n", want: []got{msg("1")}, err: io.EOF},
		{name: "id persists", in: "id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n", want: []got{
			{Type: "message", ID: "7", Data: "a"}, {Type: "message", ID: "7", Data: "b"}, msg("c"),
		}, err: io.EOF},
		{name: "id with NUL ignored", in: "id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\n", want: []got{
			{Type: "message", ID: "1", Data: "a"}, {Type: "message", ID: "1", Data: "b"},
		}, err: io.EOF},
		{
			name: "id of an event without data", in: "id: 9\n\n", err: io.EOF,
			after: func(t *testing.T, r *Reader) {
				if r.LastEventID() != "9" {
					t.Errorf("LastEventID = %q", r.LastEventID())
				}
			},
		},
		{name: "retry", in: "retry: 1500\ndata: a\n\ndata: b\n\n", want: []got{
			{Type: "message", Data: "a", Retry: 1500, HasRetry: true}, msg("b"),
		}, err: io.EOF},
		{
			name: "bad retry ignored", in: "retry: 15x\ndata: a\n\nretry: -1\ndata: b\n\nretry:\ndata: c\n\nretry: 99999999999999999999\ndata: d\n\n",
			want: []got{msg("a"), msg("b"), msg("c"), msg("d")}, err: io.EOF,
			after: func(t *testing.T, r *Reader) {
				if _, ok := r.Retry(); ok {
					t.Error("Retry set by invalid fields")
				}
			},
		},
		{
			name: "retry without data", in: "retry: 20\n\n", err: io.EOF,
			after: func(t *testing.T, r *Reader) {
				if ms, ok := r.Retry(); !ok || ms != 20 {
					t.Errorf("Retry = %d, %v", ms, ok)
				}
			},
		},
		{name: "no data: no dispatch", in: "event: x\n\n: c\n\ndata: y\n\n", want: []got{msg("y")}, err: io.EOF},
		{name: "empty data line dispatches", in: "data\n\n", want: []got{msg("")}, err: io.EOF},
		{name: "field without colon", in: "data\ndata\n\n", want: []got{msg("\n")}, err: io.EOF},
		{name: "unknown fields ignored", in: "foo: bar\ndata: a\nDATA: b\n\n", want: []got{msg("a")}, err: io.EOF},
		{name: "value with colons", in: "data: a: b:c\n\n", want: []got{msg("a: b:c")}, err: io.EOF},
		{name: "BOM stripped", in: "\xEF\xBB\xBFdata: a\n\n", want: []got{msg("a")}, err: io.EOF},
		{name: "only the first BOM", in: "\xEF\xBB\xBFdata: a\n\n\xEF\xBB\xBFdata: b\n\n", want: []got{msg("a")}, err: io.EOF},
		{name: "BOM before comment", in: "\xEF\xBB\xBF: c\ndata: a\n\n", want: []got{msg("a")}, err: io.EOF},
		{name: "unterminated event discarded", in: "data: a\n\ndata: b\n", want: []got{msg("a")}, err: io.ErrUnexpectedEOF},
		{name: "unterminated line", in: "data: a", err: io.ErrUnexpectedEOF},
		{name: "unterminated comment is clean", in: "data: a\n\n: bye", want: []got{msg("a")}, err: io.EOF},
		{name: "data at the bound", in: "data: 12345\ndata: 6789\n\n", max: 10, want: []got{msg("12345\n6789")}, err: io.EOF},
		{name: "data over the bound", in: "data: 12345\ndata: 67890\n\n", max: 10, err: ErrEventTooLarge},
		{name: "line over the bound", in: ": " + strings.Repeat("x", 40) + "\ndata: a\n\n", max: 20, err: ErrEventTooLarge},
		{name: "unterminated long line", in: "data: " + strings.Repeat("x", 40), max: 20, err: ErrEventTooLarge},
		{name: "many events", in: strings.Repeat("data: x\n\n", 1000), want: func() []got {
			out := make([]got, 1000)
			for i := range out {
				out[i] = msg("x")
			}
			return out
		}(), err: io.EOF},
	}
	readers := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"byte by byte", iotest.OneByteReader},
		{"half", iotest.HalfReader},
	}
	for _, tt := range tests {
		for _, rd := range readers {
			t.Run(tt.name+"/"+rd.name, func(t *testing.T) {
				r := NewReader(rd.wrap(strings.NewReader(tt.in)), tt.max)
				var out []got
				var err error
				for {
					var ev Event
					ev, err = r.Next()
					if err != nil {
						break
					}
					out = append(out, got{ev.Type, ev.ID, string(ev.Data), ev.Retry, ev.HasRetry})
				}
				if !errors.Is(err, tt.err) {
					t.Fatalf("error = %v, want %v", err, tt.err)
				}
				if len(out) != len(tt.want) {
					t.Fatalf("events = %+v, want %+v", out, tt.want)
				}
				for i := range out {
					if out[i] != tt.want[i] {
						t.Errorf("event %d = %+v, want %+v", i, out[i], tt.want[i])
					}
				}
				if _, again := r.Next(); again != err {
					t.Errorf("error not sticky: %v then %v", err, again)
				}
				if tt.after != nil {
					tt.after(t, r)
				}
			})
		}
	}
}

func TestReaderDataReused(t *testing.T) {
	r := NewReader(strings.NewReader("data: first\n\ndata: other\n\n"), 0)
	a, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	first := string(a.Data)
	b, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if first != "first" || string(b.Data) != "other" {
		t.Fatalf("got %q, %q", first, b.Data)
	}
}

// errReader fails after its content.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		return n, e.err
	}
	return n, err
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestReaderErrors(t *testing.T) {
	boom := errors.New("boom")
	evs, err := readAll(&errReader{strings.NewReader("data: a\n\ndata: b"), boom}, 0)
	if !errors.Is(err, boom) || len(evs) != 1 {
		t.Fatalf("events %v, err %v", evs, err)
	}
	if _, err := readAll(zeroReader{}, 0); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("err = %v, want io.ErrNoProgress", err)
	}
}

func TestAppendEvent(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"data only", Event{Data: []byte("x")}, "data: x\n\n"},
		{"message type omitted", Event{Type: "message", Data: []byte("x")}, "data: x\n\n"},
		{"all fields", Event{Type: "t", ID: "1", Data: []byte("a\nb"), Retry: 10, HasRetry: true}, "id: 1\nevent: t\nretry: 10\ndata: a\ndata: b\n\n"},
		{"empty data", Event{}, "data: \n\n"},
		{"trailing newline", Event{Data: []byte("a\n")}, "data: a\ndata: \n\n"},
		{"CRLF and CR split", Event{Data: []byte("a\r\nb\rc")}, "data: a\ndata: b\ndata: c\n\n"},
		{"id and type cut at line end", Event{ID: "1\nid: 2", Type: "x\revil"}, "id: 1\nevent: x\ndata: \n\n"},
		{"negative retry omitted", Event{Retry: -5, HasRetry: true}, "data: \n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(AppendEvent([]byte("prefix|"), tt.ev)); got != "prefix|"+tt.want {
				t.Errorf("got %q, want %q", got, "prefix|"+tt.want)
			}
		})
	}
}

func TestAppendEventAllocs(t *testing.T) {
	dst := make([]byte, 0, 1024)
	ev := Event{Type: "message", ID: "42", Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\nsecond line")}
	if n := testing.AllocsPerRun(100, func() { dst = AppendEvent(dst[:0], ev) }); n != 0 {
		t.Fatalf("AppendEvent allocates %v times", n)
	}
}

func TestReaderAllocs(t *testing.T) {
	stream := bytes.Repeat([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\ndata: more\n\n"), 64)
	rr := &repeatReader{data: stream}
	r := NewReader(rr, 0)
	for range 100 { // warm up: buffers reach their size
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Next allocates %v times per event", n)
	}
}

// repeatReader returns data over and over.
type repeatReader struct {
	data []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p, r.data[r.off:])
	r.off = (r.off + n) % len(r.data)
	return n, nil
}

func BenchmarkReader(b *testing.B) {
	ev := []byte("event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hello world\"}]}}\n\n")
	rr := &repeatReader{data: bytes.Repeat(ev, 100)}
	r := NewReader(rr, 0)
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendEvent(b *testing.B) {
	ev := Event{Type: "message", ID: "17", Data: []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello world"}]}}`)}
	dst := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendEvent(dst[:0], ev)
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("data: a\n\n"), "t", "1", []byte("x\ny"), 5)
	f.Add([]byte("\xEF\xBB\xBFevent: e\r\nid: 2\rretry: 9\ndata\n\n: c\n"), "", "", []byte(""), -1)
	f.Add([]byte("data: "+strings.Repeat("z", 100)+"\n\n"), "message", "id\x00", []byte("\r\n\r"), 0)
	f.Fuzz(func(t *testing.T, raw []byte, typ, id string, data []byte, retry int) {
		const bound = 64
		// Any input: no panic, bounded data, and the same events however
		// the input is split into reads.
		whole, errWhole := readAll(bytes.NewReader(raw), bound)
		split, errSplit := readAll(iotest.OneByteReader(bytes.NewReader(raw)), bound)
		if errWhole != errSplit || len(whole) != len(split) {
			t.Fatalf("whole %v %v, split %v %v", whole, errWhole, split, errSplit)
		}
		for i := range whole {
			if whole[i] != split[i] {
				t.Fatalf("event %d: %+v vs %+v", i, whole[i], split[i])
			}
			if len(whole[i].Data) > bound {
				t.Fatalf("event of %d bytes passed a bound of %d", len(whole[i].Data), bound)
			}
		}

		// Round trip of an event without CR: what AppendEvent writes reads back.
		if bytes.IndexByte(data, '\r') >= 0 || strings.ContainsAny(typ, "\r\n") || strings.ContainsAny(id, "\r\n") {
			return
		}
		ev := Event{Type: typ, ID: id, Data: data, Retry: retry, HasRetry: retry >= 0 && retry <= maxRetry}
		wire := AppendEvent(nil, ev)
		r := NewReader(bytes.NewReader(wire), max(len(data), len(typ), len(id))+1)
		back, err := r.Next()
		if err != nil {
			t.Fatalf("reading %q: %v", wire, err)
		}
		wantType := typ
		if wantType == "" {
			wantType = "message"
		}
		wantID := id
		if strings.IndexByte(id, 0) >= 0 {
			wantID = ""
		}
		if back.Type != wantType || back.ID != wantID || !bytes.Equal(back.Data, data) || back.HasRetry != ev.HasRetry || (ev.HasRetry && back.Retry != retry) {
			t.Fatalf("round trip of %+v via %q gave %+v", ev, wire, back)
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("after the event: %v", err)
		}
	})
}
