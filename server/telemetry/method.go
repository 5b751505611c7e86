package telemetry

// Method indexes: the standard HTTP methods plus methodOther for anything a
// client invents, so arbitrary methods cannot grow the number of series.
const (
	methodGet = iota
	methodHead
	methodPost
	methodPut
	methodDelete
	methodConnect
	methodOptions
	methodTrace
	methodPatch
	methodOther
	numMethods
)

// methodNames are the label values, indexed like the constants above.
var methodNames = [numMethods]string{
	methodGet:     "GET",
	methodHead:    "HEAD",
	methodPost:    "POST",
	methodPut:     "PUT",
	methodDelete:  "DELETE",
	methodConnect: "CONNECT",
	methodOptions: "OPTIONS",
	methodTrace:   "TRACE",
	methodPatch:   "PATCH",
	methodOther:   "OTHER",
}

// methodIndex classifies a request method. Methods are case-sensitive
// (RFC 9110 section 9.1), so "get" is OTHER. It does not allocate.
func methodIndex(m []byte) int {
	switch string(m) {
	case "GET":
		return methodGet
	case "HEAD":
		return methodHead
	case "POST":
		return methodPost
	case "PUT":
		return methodPut
	case "DELETE":
		return methodDelete
	case "CONNECT":
		return methodConnect
	case "OPTIONS":
		return methodOptions
	case "TRACE":
		return methodTrace
	case "PATCH":
		return methodPatch
	}
	return methodOther
}
