package logline

// Method returns an HTTP request method for a log field: a constant string
// for the standard methods (StandardMethod), else a copy, so the field
// outlives the request's buffer.
func Method(m []byte) string {
	if s, ok := StandardMethod(m); ok {
		return s
	}
	return string(m)
}

// StandardMethod returns a standard HTTP method's name as a constant
// string (the switch compares the bytes without allocating); ok is false
// for any other method.
func StandardMethod(m []byte) (string, bool) {
	switch string(m) {
	case "GET":
		return "GET", true
	case "POST":
		return "POST", true
	case "PUT":
		return "PUT", true
	case "DELETE":
		return "DELETE", true
	case "HEAD":
		return "HEAD", true
	case "OPTIONS":
		return "OPTIONS", true
	case "PATCH":
		return "PATCH", true
	case "CONNECT":
		return "CONNECT", true
	case "TRACE":
		return "TRACE", true
	}
	return "", false
}
