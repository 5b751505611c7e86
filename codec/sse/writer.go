package sse

import "strconv"

// AppendEvent appends ev in text/event-stream form to dst and returns the
// extended slice; it allocates only when dst must grow.
//
// Data is split at every line end (LF, CRLF or CR) into data lines, so a
// Reader gets it back with the line ends normalised to LF; empty Data is
// written as one empty data line, so the event is still dispatched. An ID or
// Type is cut at its first CR or LF, which could not be framed (an ID holding
// NUL is written but ignored by readers, per the WHATWG rules). Type "" and
// "message" are written as no event line; Retry is written when HasRetry is
// set and Retry is not negative.
func AppendEvent(dst []byte, ev Event) []byte {
	if ev.ID != "" {
		dst = append(dst, "id: "...)
		dst = append(dst, firstLine(ev.ID)...)
		dst = append(dst, '\n')
	}
	if ev.Type != "" && ev.Type != typeMessage {
		dst = append(dst, "event: "...)
		dst = append(dst, firstLine(ev.Type)...)
		dst = append(dst, '\n')
	}
	if ev.HasRetry && ev.Retry >= 0 {
		dst = append(dst, "retry: "...)
		dst = strconv.AppendInt(dst, int64(ev.Retry), 10)
		dst = append(dst, '\n')
	}
	data := ev.Data
	for {
		i := indexEOL(data)
		if i < 0 {
			dst = append(dst, "data: "...)
			dst = append(dst, data...)
			dst = append(dst, '\n')
			break
		}
		dst = append(dst, "data: "...)
		dst = append(dst, data[:i]...)
		dst = append(dst, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	return append(dst, '\n')
}

// firstLine is s up to its first CR or LF.
func firstLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' || s[i] == '\r' {
			return s[:i]
		}
	}
	return s
}
