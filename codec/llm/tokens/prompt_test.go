package tokens

import "bytes"

// prompt4KB is a 4 KiB chat prompt: instructions, prose with numbers, a list
// and a code fragment.
func prompt4KB() []byte {
	para := "You are a helpful assistant for an online store. Answer in a friendly, concise tone.\n" +
		"Customer question: my order #48213 arrived on March 14 with 2 of the 5 items missing; " +
		"the invoice says $129.99 was charged. What are my options?\n" +
		"- Check the shipping policy (section 4.2) before answering.\n" +
		"- If a refund applies, explain the steps.\n" +
		"```go\nfunc refund(order int, amount float64) error { return nil }\n```\n"
	var b bytes.Buffer
	for b.Len() < 4096 {
		b.WriteString(para)
	}
	return b.Bytes()[:4096]
}
