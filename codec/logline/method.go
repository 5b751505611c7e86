package logline

// Method returns an HTTP request method for a log field: a constant string
// for the standard methods (the switch compares the bytes without
// allocating), else a copy, so the field outlives the request's buffer.
func Method(m []byte) string {
	switch string(m) {
	case "GET":
		return "GET"
	case "POST":
		return "POST"
	case "PUT":
		return "PUT"
	case "DELETE":
		return "DELETE"
	case "HEAD":
		return "HEAD"
	case "OPTIONS":
		return "OPTIONS"
	case "PATCH":
		return "PATCH"
	case "CONNECT":
		return "CONNECT"
	case "TRACE":
		return "TRACE"
	}
	return string(m)
}
