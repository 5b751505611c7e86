package promptcache

// bedrock marks Bedrock Converse requests: a {"cachePoint":{"type":
// "default"}} block appended to the system array, to a message's content
// and to toolConfig.tools (agentgateway's places, bedrock.rs).
type bedrock struct{}

// cachePointBlock is the block Apply appends, as the AWS SDK encodes
// types.CachePointBlock{Type: types.CachePointTypeDefault}.
const cachePointBlock = `{"cachePoint":{"type":"default"}}`

func (bedrock) mark() string        { return "cachePoint" }
func (bedrock) toolsMember() string { return "toolConfig" }

// toolList is toolConfig.tools.
func (bedrock) toolList(section []byte) []byte {
	tools, present, once := member(section, "tools")
	if !present || !once {
		return nil
	}
	return tools
}

func (bedrock) systemPoint(body, system []byte) point { return appendPoint(body, system) }
func (bedrock) toolsPoint(body, tools []byte) point   { return appendPoint(body, tools) }

func (bedrock) messagePoint(body, message []byte) point {
	content, present, once := member(message, "content")
	if !present || !once {
		return none
	}
	return appendPoint(body, content)
}

// appendPoint puts a cache point block at the end of arr (a slice of
// body), unless arr is empty (a point needs something before it) or
// already ends with one.
func appendPoint(body, arr []byte) point {
	var e elements
	e.reset(arr)
	var last []byte
	for e.next() {
		last = e.value
	}
	if !e.ok() || last == nil {
		return none
	}
	if mark, present, _ := member(last, "cachePoint"); present {
		if string(mark) == "null" {
			return none
		}
		return point{state: marked}
	}
	at := offsetIn(body, arr) + len(arr) - 1 // its closing bracket
	return point{state: addable, edit: edit{at: at, end: at, insert: "," + cachePointBlock}}
}
